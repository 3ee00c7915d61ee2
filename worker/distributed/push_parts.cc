// PlanPushParts and ChoosePushSizes: how a step's push is cut (push_parts.h). Pure: the
// simulator (bench/scale_sim) runs the same plan as the workers.
#include "worker/distributed/push_parts.h"

#include <map>

namespace pstrain {
namespace worker {

PushSizes ChoosePushSizes(int replicas, int num_ps, std::optional<int64_t> partition_bytes,
                          std::optional<int64_t> part_bytes) {
  PushSizes sizes;
  if (replicas > 0 || num_ps >= kManyServers) sizes = {kReplicatedPushBytes, kReplicatedPushBytes};
  if (partition_bytes) sizes.partition_bytes = *partition_bytes;
  if (part_bytes) sizes.part_bytes = *part_bytes;
  return sizes;
}

int ClientIoThreads(int num_ps) { return num_ps >= kManyServers ? 4 : 2; }

std::vector<std::vector<PushPart>> PlanPushParts(const replication::Sharding& sharding,
                                                 const std::vector<std::string>& variable_order,
                                                 int64_t part_bytes,
                                                 const std::map<std::string, int>& layer_of,
                                                 int64_t layer_floor_bytes) {
  std::vector<std::vector<PushPart>> parts(sharding.num_ps());
  std::vector<int> last_layer(sharding.num_ps(), -1);  // of each server's last partition
  std::map<std::string, std::vector<const replication::Partition*>> of_variable;
  for (const replication::Partition& p : sharding.partitions())
    of_variable[p.variable].push_back(&p);
  for (auto v = variable_order.rbegin(); v != variable_order.rend(); ++v) {
    const auto layer = layer_of.find(*v);
    for (const replication::Partition* p : of_variable[*v]) {
      std::vector<PushPart>& mine = parts[p->task];
      const bool new_layer = layer != layer_of.end() && layer->second != last_layer[p->task] &&
                             !mine.empty() && mine.back().bytes >= layer_floor_bytes;
      if (mine.empty() || mine.back().bytes >= part_bytes || new_layer) mine.emplace_back();
      if (layer != layer_of.end()) last_layer[p->task] = layer->second;
      mine.back().partitions.push_back(*p);
      mine.back().bytes += p->shape.num_elements() * static_cast<int64_t>(sizeof(float));
    }
  }
  return parts;
}

std::vector<std::vector<PushPart>> PlanStepParts(const replication::Sharding& sharding,
                                                 const std::vector<LayerVariables>& layers,
                                                 int64_t part_bytes, PullSchedule schedule) {
  std::vector<std::string> order;  // the model's, as the sharding took it
  for (const replication::Partition& p : sharding.partitions()) {
    if (order.empty() || order.back() != p.variable) order.push_back(p.variable);
  }
  std::map<std::string, int> layer_of;
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const std::string& name : layers[i].variables) layer_of[name] = static_cast<int>(i);
  }
  const int64_t floor = schedule == PullSchedule::kStep ? part_bytes / kStepLayerFloorDivisor : 0;
  return PlanPushParts(sharding, order, part_bytes, layer_of, floor);
}

}  // namespace worker
}  // namespace pstrain
