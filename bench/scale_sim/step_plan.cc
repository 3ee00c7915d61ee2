#include "bench/scale_sim/step_plan.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>

#include "common/replication/sharding.h"
#include "worker/distributed/pull_schedule.h"
#include "worker/distributed/push_parts.h"

namespace scale_sim {

namespace {

using pstrain::replication::Partition;

template <typename T>
T OrStop(pstrain::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "pstrain-scale-sim: %s: %s\n", what, r.status().ToString().c_str());
    std::exit(2);
  }
  return std::move(r).value();
}

}  // namespace

StepPlan PlanStep(const std::vector<SimVariable>& variables, int servers, int64_t partition_bytes,
                  int64_t part_bytes, bool per_layer_pulls, int64_t layer_floor_bytes) {
  // pstrain's own sharding and plans, as every worker computes them.
  std::vector<pstrain::replication::VariableSpec> specs;
  std::vector<std::string> order;
  std::map<std::string, int> variable_index, layer_of;
  std::vector<pstrain::worker::LayerVariables> layers;
  for (size_t i = 0; i < variables.size(); ++i) {
    const SimVariable& v = variables[i];
    specs.push_back({v.name, pstrain::Shape(v.shape)});
    order.push_back(v.name);
    variable_index[v.name] = static_cast<int>(i);
    layer_of[v.name] = v.layer;
    if (static_cast<int>(layers.size()) <= v.layer) layers.push_back({v.name, {}});
    layers[v.layer].variables.push_back(v.name);
  }
  const auto sharding = OrStop(
      pstrain::replication::Sharding::Compute(specs, servers, partition_bytes), "the sharding");
  using pstrain::worker::PullSchedule;
  const auto parts =
      part_bytes <= 0  // a whole push: one part per server holding all it has
          ? pstrain::worker::PlanPushParts(sharding, order, std::numeric_limits<int64_t>::max())
          : layer_floor_bytes < 0
                ? pstrain::worker::PlanStepParts(
                      sharding, layers, part_bytes,
                      per_layer_pulls ? PullSchedule::kPerLayer : PullSchedule::kStep)
                : pstrain::worker::PlanPushParts(sharding, order, part_bytes, layer_of,
                                                 layer_floor_bytes);
  const auto pulls = OrStop(pstrain::worker::PlanLayerPulls(sharding, layers), "the layer pulls");

  StepPlan plan;
  std::map<std::string, int> partition_index;
  for (const Partition& p : sharding.partitions()) {
    partition_index[p.key] = static_cast<int>(plan.partitions.size());
    plan.partitions.push_back(
        {variable_index.at(p.variable), p.task, p.shape.num_elements() * int64_t{4}});
  }
  auto part_of = [&](int server, const std::vector<Partition>& partitions) {
    SimPart part{server, {}, 0, std::numeric_limits<int>::max()};
    for (const Partition& p : partitions) {
      const int i = partition_index.at(p.key);
      part.partitions.push_back(i);
      part.bytes += plan.partitions[i].bytes;
      part.first_layer = std::min(part.first_layer, layer_of.at(p.variable));
    }
    return part;
  };
  plan.parts.assign(servers, {});
  for (int s = 0; s < servers; ++s) {
    for (const pstrain::worker::PushPart& p : parts[s]) {
      plan.parts[s].push_back(part_of(s, p.partitions));
    }
  }
  plan.layer_pulls.assign(layers.size(), {});
  for (const pstrain::worker::LayerPull& pull : pulls) {
    plan.layer_pulls[pull.layer].push_back(part_of(pull.server, pull.partitions));
  }
  plan.layer_bytes.assign(layers.size(), 0);
  for (const SimVariable& v : variables) plan.layer_bytes[v.layer] += v.bytes();
  for (int64_t b : plan.layer_bytes) plan.bytes += b;
  return plan;
}

}  // namespace scale_sim
