#include "bench/scale_sim/step_plan.h"

#include <algorithm>
#include <map>

namespace scale_sim {

namespace {

std::vector<SimPartition> Shard(const std::vector<SimVariable>& variables, int servers,
                                int64_t partition_bytes) {
  std::vector<SimPartition> out;
  std::vector<int64_t> load(servers, 0);
  auto place = [&](int variable, int64_t bytes) {
    const int server = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[server] += bytes;
    out.push_back({variable, server, bytes});
  };
  for (size_t i = 0; i < variables.size(); ++i) {
    const SimVariable& v = variables[i];
    const int64_t bytes = v.bytes();
    const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
    int64_t parts = 1;
    if (partition_bytes > 0 && bytes > partition_bytes && rows > 1) {
      parts = std::min(rows, (bytes + partition_bytes - 1) / partition_bytes);
    }
    const int64_t row_bytes = bytes / rows;
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t n = rows / parts + (p < rows % parts ? 1 : 0);
      place(static_cast<int>(i), n * row_bytes);
    }
  }
  return out;
}

}  // namespace

StepPlan PlanStep(const std::vector<SimVariable>& variables, int servers, int64_t partition_bytes,
                  int64_t part_bytes, bool end_at_layers) {
  StepPlan plan;
  plan.partitions = Shard(variables, servers, partition_bytes);
  const int layers = variables.empty() ? 0 : variables.back().layer + 1;
  plan.layer_bytes.assign(layers, 0);
  for (const SimVariable& v : variables) plan.layer_bytes[v.layer] += v.bytes();
  for (int64_t b : plan.layer_bytes) plan.bytes += b;

  std::map<int, std::vector<int>> of_variable;
  for (size_t p = 0; p < plan.partitions.size(); ++p) {
    of_variable[plan.partitions[p].variable].push_back(static_cast<int>(p));
  }
  plan.parts.assign(servers, {});
  std::vector<int> last_layer(servers, -1);
  for (int v = static_cast<int>(variables.size()) - 1; v >= 0; --v) {
    const int layer = variables[v].layer;
    for (int p : of_variable[v]) {
      const int s = plan.partitions[p].server;
      std::vector<SimPart>& mine = plan.parts[s];
      const bool new_layer = end_at_layers && layer != last_layer[s];
      const bool full = part_bytes > 0 && !mine.empty() && mine.back().bytes >= part_bytes;
      if (mine.empty() || full || new_layer) mine.push_back({s, {}, 0, layer});
      last_layer[s] = layer;
      mine.back().partitions.push_back(p);
      mine.back().bytes += plan.partitions[p].bytes;
      mine.back().first_layer = std::min(mine.back().first_layer, layer);
    }
  }

  plan.layer_pulls.assign(layers, {});
  for (int layer = 0; layer < layers; ++layer) {
    std::map<int, SimPart> by_server;
    for (size_t p = 0; p < plan.partitions.size(); ++p) {
      const SimPartition& q = plan.partitions[p];
      if (variables[q.variable].layer != layer) continue;
      SimPart& pull = by_server[q.server];
      pull.server = q.server;
      pull.first_layer = layer;
      pull.partitions.push_back(static_cast<int>(p));
      pull.bytes += q.bytes;
    }
    for (auto& [server, pull] : by_server) plan.layer_pulls[layer].push_back(pull);
  }
  return plan;
}

}  // namespace scale_sim
