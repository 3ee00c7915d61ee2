// PsClient's per-layer pulls (--pull_schedule per_layer or late; pull_schedule.h says when each
// schedule reads, ps_client.h how the pulls share the step's requests with its pushes).
#include <algorithm>

#include "worker/distributed/ps_client.h"
#include "worker/distributed/step_parts.h"

namespace pstrain {
namespace worker {

Status PsClient::set_pull_schedule(PullSchedule schedule,
                                   const std::vector<LayerVariables>& layers) {
  CHECK(parts_ != nullptr || schedule == PullSchedule::kStep)
      << "a per-layer pull schedule needs the overlapped push (set_push_part_bytes)";
  if (parts_ == nullptr) return Status::OK();
  UseParts(PlanStepParts(sharding_, layers, part_bytes_, schedule));
  if (parts_ == nullptr || schedule == PullSchedule::kStep) return Status::OK();
  ASSIGN_OR_RETURN(std::vector<LayerPull> pulls, PlanLayerPulls(sharding_, layers));
  StepParts& p = *parts_;
  p.pulls = std::move(pulls);
  for (size_t j = 0; j < p.pulls.size(); ++j) {
    std::vector<Variable*> owners;
    for (const replication::Partition& q : p.pulls[j].partitions) {
      auto v = std::find_if(variables_.begin(), variables_.end(),
                            [&](const Variable* v) { return v->name == q.variable; });
      CHECK(v != variables_.end()) << "no variable '" << q.variable << "'";
      owners.push_back(*v);
    }
    p.pull_owners.push_back(std::move(owners));
    p.pulls_of_layer[p.pulls[j].layer].push_back(j);
    p.layer_names[p.pulls[j].layer] = layers[p.pulls[j].layer].layer;
  }
  p.schedule = schedule;
  return Status::OK();
}

PullSchedule PsClient::pull_schedule() const {
  return parts_ == nullptr ? PullSchedule::kStep : parts_->schedule;
}

Status PsClient::SendLayerPull(size_t j) {
  StepParts& p = *parts_;
  const LayerPull& pull = p.pulls[j];
  p.pull_request[j] = static_cast<int64_t>(p.sent.size());
  p.sent.push_back({pull.server, 0, true, static_cast<int64_t>(j)});
  p.timeline.Issued(pull.label);
  return router_->Send(p.flight.get(), pull.server, StepPull(pull.partitions));
}

Status PsClient::AwaitLayer(int layer) {
  StepParts& p = *parts_;
  RETURN_IF_ERROR(p.error);
  auto it = p.pulls_of_layer.find(layer);
  if (it == p.pulls_of_layer.end()) return Status::OK();
  std::vector<size_t> wanted;
  for (size_t j : it->second) {
    if (p.pull_request[j] < 0) {  // late: sent now
      Status sent = SendLayerPull(j);
      if (!sent.ok()) return p.error = sent;
    }
    wanted.push_back(static_cast<size_t>(p.pull_request[j]));
  }
  Status copied = Status::OK();
  Status waited =
      router_->AwaitSome(p.flight.get(), kStepTimeout, wanted,
                         [&](size_t i, const wire::Message& r) { TakeStepReply(i, r, &copied); });
  if (!waited.ok()) return p.error = waited;
  if (!copied.ok()) return p.error = copied;
  p.timeline.ForwardStarts(p.layer_names[layer]);
  return Status::OK();
}

}  // namespace worker
}  // namespace pstrain
