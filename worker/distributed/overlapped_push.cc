// PsClient's overlapped push: BeginStep, Ready, FinishStep (worker/distributed/ps_client.h says
// what they do, push_parts.h why parts and how they are cut).
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "worker/distributed/push_parts.h"
#include "worker/distributed/step_parts.h"

namespace pstrain {
namespace worker {

using wire::Message;
using wire::MessageType;

namespace {
// The layers a part holds, by its variables' names ("fc1/weights": fc1), joined in its order.
std::string PartLabel(const PushPart& part, int server) {
  std::string label;
  std::string last;
  for (const replication::Partition& p : part.partitions) {
    const std::string layer = p.variable.substr(0, p.variable.find('/'));
    if (layer == last) continue;
    label += (label.empty() ? "" : "+") + layer;
    last = layer;
  }
  return label + "@ps" + std::to_string(server);
}
}  // namespace

Status CopyPulledPartitions(const std::string& server,
                            const std::vector<replication::Partition>& partitions,
                            const std::vector<Variable*>& owners, const Message& reply) {
  if (reply.tensors.size() != partitions.size()) {
    return Internal(server + " answered a pull of " + std::to_string(partitions.size()) +
                    " partitions with " + std::to_string(reply.tensors.size()) + " tensors");
  }
  for (size_t j = 0; j < partitions.size(); ++j) {  // all checked before any is copied
    const replication::Partition& q = partitions[j];
    const Tensor& got = reply.tensors[j].tensor;
    if (reply.tensors[j].name != q.key || got.shape() != q.shape) {
      return Internal(server + " answered the pull of '" + q.key + "' " + q.shape.ToString() +
                      " with '" + reply.tensors[j].name + "' " + got.shape().ToString());
    }
  }
  for (size_t j = 0; j < partitions.size(); ++j) {
    const replication::Partition& q = partitions[j];
    const Tensor& got = reply.tensors[j].tensor;
    Variable* v = owners[j];
    const int64_t rows = v->value.shape().rank() ? v->value.dim(0) : 1;
    std::memcpy(v->value.data() + q.row_begin * (v->value.size() / rows), got.data(), got.bytes());
  }
  return Status::OK();
}

void PsClient::set_push_part_bytes(int64_t part_bytes) {
  part_bytes_ = part_bytes;
  parts_.reset();
  if (part_bytes <= 0) return;
  std::vector<std::string> order;  // by size alone until set_pull_schedule gives the layers
  for (const Variable* v : variables_) order.push_back(v->name);
  UseParts(PlanPushParts(sharding_, order, part_bytes_));
}

void PsClient::UseParts(std::vector<std::vector<PushPart>> plan) {
  auto parts = std::make_shared<StepParts>();
  std::map<std::string, Variable*> by_name;
  for (Variable* v : variables_) by_name[v->name] = v;
  parts->plan = std::move(plan);
  for (size_t s = 0; s < parts->plan.size(); ++s) {
    if (parts->plan[s].empty()) {  // nothing to push there: the whole push it is
      LOG(WARNING) << Who() << ": " << ServerName(static_cast<int>(s))
                   << " holds no variable; pushing whole steps";
      part_bytes_ = 0;
      return;
    }
  }
  parts->owners.resize(parts->plan.size());
  parts->labels.resize(parts->plan.size());
  for (size_t s = 0; s < parts->plan.size(); ++s) {
    for (size_t k = 0; k < parts->plan[s].size(); ++k) {
      std::vector<Variable*> owners;
      for (const replication::Partition& p : parts->plan[s][k].partitions) {
        Variable* v = by_name.at(p.variable);
        owners.push_back(v);
        auto& in = parts->parts_of[v];
        if (in.empty() || in.back() != std::make_pair(static_cast<int>(s), k)) {
          in.emplace_back(static_cast<int>(s), k);
        }
      }
      parts->owners[s].push_back(std::move(owners));
      parts->labels[s].push_back(PartLabel(parts->plan[s][k], static_cast<int>(s)));
    }
  }
  parts_ = std::move(parts);
}

void PsClient::BeginStep(int64_t step) {
  CHECK(parts_ != nullptr) << "BeginStep without set_push_part_bytes";
  StepParts& p = *parts_;
  p.step = step;
  p.ready.clear();
  p.unready.assign(p.plan.size(), {});
  for (size_t s = 0; s < p.plan.size(); ++s) {
    for (const auto& owners : p.owners[s]) {
      p.unready[s].push_back(
          static_cast<int>(std::set<const Variable*>(owners.begin(), owners.end()).size()));
    }
  }
  p.sent_part.assign(p.plan.size(), {});
  for (size_t s = 0; s < p.plan.size(); ++s) p.sent_part[s].assign(p.plan[s].size(), false);
  p.parts_sent.assign(p.plan.size(), 0);
  p.flight = router_->Start();
  p.sent.clear();
  p.error = Status::OK();
  p.timeline.Begin(step);
  p.pull_request.assign(p.pulls.size(), -1);
  if (p.schedule != PullSchedule::kPerLayer) return;
  for (size_t j = 0; j < p.pulls.size() && p.error.ok(); ++j) p.error = SendLayerPull(j);
}

Status PsClient::SendPart(int s, size_t k) {
  StepParts& p = *parts_;
  const std::vector<replication::Partition>& partitions = p.plan[s][k].partitions;
  Message push = PushOf(s, partitions, p.step);
  p.sent_part[s][k] = true;
  // Parts still to come, whatever order they leave in: the last one sent closes the step.
  push.value = static_cast<int64_t>(p.plan[s].size() - ++p.parts_sent[s]);
  p.sent.push_back({s, k, false});
  p.timeline.Pushed(p.labels[s][k]);
  RETURN_IF_ERROR(router_->Send(p.flight.get(), s, std::move(push)));
  if (p.pulls_by_layer()) return Status::OK();  // the next step pulls by layer
  p.sent.push_back({s, k, true});
  return router_->Send(p.flight.get(), s, StepPull(partitions));
}

Status PsClient::SendReadyParts(int s) {
  StepParts& p = *parts_;
  // The plan runs in backward's order, last layer first: from its end, the input side first.
  for (size_t k = p.plan[s].size(); k-- > 0;) {
    if (!p.sent_part[s][k] && p.unready[s][k] == 0) RETURN_IF_ERROR(SendPart(s, k));
  }
  return Status::OK();
}

Status PsClient::Ready(const Variable* v) {
  StepParts& p = *parts_;
  if (!p.error.ok()) return p.error;
  if (!p.ready.insert(v).second) return Status::OK();
  auto it = p.parts_of.find(v);
  if (it == p.parts_of.end()) return Status::OK();
  std::set<int> touched;
  for (const auto& [s, k] : it->second) {
    --p.unready[s][k];
    touched.insert(s);
  }
  for (int s : touched) {
    Status sent = SendReadyParts(s);
    if (!sent.ok()) return p.error = sent;
  }
  return Status::OK();
}

void PsClient::TakeStepReply(size_t i, const Message& reply, Status* copied) {
  StepParts& p = *parts_;
  const StepParts::Sent& what = p.sent[i];
  if (!what.pull || !copied->ok()) return;
  if (what.layer_pull < 0) {
    *copied =
        CopyPulledPartitions(ServerName(what.server), p.plan[what.server][what.part].partitions,
                             p.owners[what.server][what.part], reply);
    return;
  }
  p.timeline.Arrived(p.pulls[what.layer_pull].label);
  *copied = CopyPulledPartitions(ServerName(what.server), p.pulls[what.layer_pull].partitions,
                                 p.pull_owners[what.layer_pull], reply);
}

void PsClient::BackwardDone() { parts_->timeline.BackwardEnds(); }

Result<PushPullResult> PsClient::FinishStep() {
  StepParts& p = *parts_;
  for (size_t s = 0; s < p.plan.size() && p.error.ok(); ++s) {
    // Whatever backward did not hand over (synthetic compute's constant gradients) is final.
    std::fill(p.unready[s].begin(), p.unready[s].end(), 0);
    p.error = SendReadyParts(static_cast<int>(s));
  }
  // A layer whose forward never asked (synthetic compute) is pulled all the same.
  for (size_t j = 0; j < p.pulls.size() && p.error.ok(); ++j) {
    if (p.pull_request[j] < 0) p.error = SendLayerPull(j);
  }
  RETURN_IF_ERROR(p.error);
  // Each pulled part goes into the variables as it arrives, while later parts are on the wire;
  // its frames are released with the reply.
  Status copied = Status::OK();
  ASSIGN_OR_RETURN(std::vector<Message> replies,
                   router_->Await(p.flight.get(), kStepTimeout, [&](size_t i, const Message& r) {
                     TakeStepReply(i, r, &copied);
                   }));
  p.flight.reset();
  RETURN_IF_ERROR(copied);
  p.timeline.Log(Who());
  PushPullResult result;
  for (size_t i = 0; i < replies.size(); ++i) {
    const StepParts::Sent& what = p.sent[i];
    if (!what.pull) result.dropped |= replies[i].value < 0;
    // Server 0's answer to the last request about its parts: the step this worker's push
    // closed (the pull after its last part, or with per-layer pulls that part's push).
    const bool closes = p.pulls_by_layer() ? !what.pull : what.pull;
    if (what.server == 0 && closes) result.global_step = replies[i].step;
  }
  NoteStepAcknowledged(result.global_step);
  return result;
}

}  // namespace worker
}  // namespace pstrain
