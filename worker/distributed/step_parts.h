// The state of one overlapped step inside PsClient: its push's parts (push_parts.cc plans them,
// overlapped_push.cc sends them) and, with a per-layer pull schedule, its pulls (layer_pulls.cc).
// Private to those files and ps_client.cc; ps_client.h says what the step does.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "worker/distributed/ps_client.h"
#include "worker/distributed/pull_schedule.h"
#include "worker/distributed/push_parts.h"
#include "worker/distributed/step_timeline.h"

namespace pstrain {
namespace worker {

struct PsClient::StepParts {
  std::vector<std::vector<PushPart>> plan;  // [server][part]
  // The variable of each partition, [server][part][i].
  std::vector<std::vector<std::vector<Variable*>>> owners;
  // Each part's layers for the timeline, [server][part]: "fc2+fc1@ps0".
  std::vector<std::vector<std::string>> labels;
  // The parts each variable is in, as (server, part).
  std::map<const Variable*, std::vector<std::pair<int, size_t>>> parts_of;
  // Per-layer pulls: the plan, the variable of each pulled partition ([pull][i]) and each
  // layer's pulls (indices into `pulls`). Empty with --pull_schedule=step.
  PullSchedule schedule = PullSchedule::kStep;
  std::vector<LayerPull> pulls;
  std::vector<std::vector<Variable*>> pull_owners;
  std::map<int, std::vector<size_t>> pulls_of_layer;
  std::map<int, std::string> layer_names;  // of the layers that have pulls

  // The step under way.
  int64_t step = 0;
  std::set<const Variable*> ready;
  std::vector<std::vector<int>> unready;     // [server][part]: its variables not ready yet
  std::vector<std::vector<bool>> sent_part;  // [server][part]
  std::vector<size_t> parts_sent;            // per server
  std::vector<int64_t> pull_request;         // per pull: its index in `flight`, -1 not sent
  std::shared_ptr<RequestRouter::InFlight> flight;
  // What each request of `flight` is: a part's push (`pull` false), the pull after a part
  // (`layer_pull` -1) or a per-layer pull.
  struct Sent {
    int server = 0;
    size_t part = 0;
    bool pull = false;
    int64_t layer_pull = -1;
  };
  std::vector<Sent> sent;
  StepTimeline timeline;
  Status error = Status::OK();  // the first failure of the step, returned by FinishStep

  bool pulls_by_layer() const { return schedule != PullSchedule::kStep; }
};

// Copies a pull's reply of `partitions` (those of `owners`, one each) into the variables' rows,
// after checking every tensor's name and shape; `server` names the answering server in errors.
Status CopyPulledPartitions(const std::string& server,
                            const std::vector<replication::Partition>& partitions,
                            const std::vector<Variable*>& owners, const wire::Message& reply);

}  // namespace worker
}  // namespace pstrain
