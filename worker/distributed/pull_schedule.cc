#include "worker/distributed/pull_schedule.h"

#include <map>
#include <set>

#include "common/enum_names.h"

namespace pstrain {
namespace worker {

constexpr EnumName<PullSchedule> kPullSchedules[] = {{PullSchedule::kStep, "step"},
                                                     {PullSchedule::kPerLayer, "per_layer"},
                                                     {PullSchedule::kLate, "late"}};

Result<PullSchedule> ParsePullSchedule(const std::string& value) {
  return ValueNamed(kPullSchedules, value, "--pull_schedule");
}

std::string PullScheduleName(PullSchedule schedule) {
  return NameOf(kPullSchedules, schedule, "?");
}

Result<std::vector<LayerPull>> PlanLayerPulls(const replication::Sharding& sharding,
                                              const std::vector<LayerVariables>& layers) {
  std::map<std::string, std::vector<const replication::Partition*>> of_variable;
  for (const replication::Partition& p : sharding.partitions()) {
    of_variable[p.variable].push_back(&p);
  }
  std::vector<LayerPull> pulls;
  std::set<std::string> covered;
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    std::map<int, LayerPull> by_server;
    for (const std::string& name : layers[layer].variables) {
      covered.insert(name);
      for (const replication::Partition* p : of_variable[name]) {
        LayerPull& pull = by_server[p->task];
        pull.layer = static_cast<int>(layer);
        pull.server = p->task;
        pull.label = layers[layer].layer + "@ps" + std::to_string(p->task);
        pull.partitions.push_back(*p);
      }
    }
    for (auto& [server, pull] : by_server) pulls.push_back(std::move(pull));
  }
  for (const replication::Partition& p : sharding.partitions()) {
    if (covered.count(p.variable) == 0) {
      return InvalidArgument("variable '" + p.variable + "' (partition '" + p.key +
                             "') belongs to no layer; a per-layer pull schedule would never "
                             "read it back");
    }
  }
  return pulls;
}

}  // namespace worker
}  // namespace pstrain
