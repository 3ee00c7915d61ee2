// PlanPushParts, and PsClient's overlapped push: BeginStep, Ready, FinishStep
// (worker/distributed/ps_client.h says what they do, push_parts.h why parts).
#include "worker/distributed/push_parts.h"

#include <cstring>
#include <map>
#include <set>

#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace worker {

using wire::Message;
using wire::MessageType;

PushSizes ChoosePushSizes(int replicas, std::optional<int64_t> partition_bytes,
                          std::optional<int64_t> part_bytes) {
  PushSizes sizes;
  if (replicas > 0) sizes = {kReplicatedPushBytes, kReplicatedPushBytes};
  if (partition_bytes) sizes.partition_bytes = *partition_bytes;
  if (part_bytes) sizes.part_bytes = *part_bytes;
  return sizes;
}

std::vector<std::vector<PushPart>> PlanPushParts(const replication::Sharding& sharding,
                                                 const std::vector<std::string>& variable_order,
                                                 int64_t part_bytes) {
  std::vector<std::vector<PushPart>> parts(sharding.num_ps());
  std::map<std::string, std::vector<const replication::Partition*>> of_variable;
  for (const replication::Partition& p : sharding.partitions())
    of_variable[p.variable].push_back(&p);
  for (auto v = variable_order.rbegin(); v != variable_order.rend(); ++v) {
    for (const replication::Partition* p : of_variable[*v]) {
      std::vector<PushPart>& mine = parts[p->task];
      if (mine.empty() || mine.back().bytes >= part_bytes) mine.emplace_back();
      mine.back().partitions.push_back(*p);
      mine.back().bytes += p->shape.num_elements() * static_cast<int64_t>(sizeof(float));
    }
  }
  return parts;
}

struct PsClient::StepParts {
  std::vector<std::vector<PushPart>> plan;  // [server][part]
  // The variable of each partition, [server][part][i].
  std::vector<std::vector<std::vector<Variable*>>> owners;
  // The parts each variable is in, as (server, part).
  std::map<const Variable*, std::vector<std::pair<int, size_t>>> parts_of;

  // The step under way.
  int64_t step = 0;
  std::set<const Variable*> ready;
  std::vector<std::vector<int>> unready;  // [server][part]: its variables not ready yet
  std::vector<size_t> next;               // per server: its next part to send
  std::shared_ptr<RequestRouter::InFlight> flight;
  // What each request of `flight` is: (server, part), and whether it is the pull.
  struct Sent {
    int server = 0;
    size_t part = 0;
    bool pull = false;
  };
  std::vector<Sent> sent;
  Status error = Status::OK();  // the first failure of the step, returned by FinishStep
};

void PsClient::set_push_part_bytes(int64_t part_bytes) {
  part_bytes_ = part_bytes;
  parts_.reset();
  if (part_bytes <= 0) return;
  auto parts = std::make_shared<StepParts>();
  std::vector<std::string> order;
  std::map<std::string, Variable*> by_name;
  for (Variable* v : variables_) {
    order.push_back(v->name);
    by_name[v->name] = v;
  }
  parts->plan = PlanPushParts(sharding_, order, part_bytes);
  for (size_t s = 0; s < parts->plan.size(); ++s) {
    if (parts->plan[s].empty()) {  // nothing to push there: the whole push it is
      LOG(WARNING) << Who() << ": " << ServerName(static_cast<int>(s))
                   << " holds no variable; pushing whole steps";
      part_bytes_ = 0;
      return;
    }
  }
  parts->owners.resize(parts->plan.size());
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
  p.next.assign(p.plan.size(), 0);
  p.flight = router_->Start();
  p.sent.clear();
  p.error = Status::OK();
}

Status PsClient::SendPart(int s, size_t k) {
  StepParts& p = *parts_;
  const std::vector<replication::Partition>& partitions = p.plan[s][k].partitions;
  Message push = PushOf(s, partitions, p.step);
  push.value = static_cast<int64_t>(p.plan[s].size() - 1 - k);  // parts still to come
  Message pull = StepPull(partitions);
  p.sent.push_back({s, k, false});
  RETURN_IF_ERROR(router_->Send(p.flight.get(), s, std::move(push)));
  p.sent.push_back({s, k, true});
  return router_->Send(p.flight.get(), s, std::move(pull));
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
  // Each server's parts leave in its order, so that the one closing the step goes last.
  for (int s : touched) {
    while (p.next[s] < p.plan[s].size() && p.unready[s][p.next[s]] == 0) {
      Status sent = SendPart(s, p.next[s]++);
      if (!sent.ok()) return p.error = sent;
    }
  }
  return Status::OK();
}

Result<PushPullResult> PsClient::FinishStep() {
  StepParts& p = *parts_;
  for (size_t s = 0; s < p.plan.size() && p.error.ok(); ++s) {
    while (p.next[s] < p.plan[s].size() && p.error.ok()) {
      p.error = SendPart(static_cast<int>(s), p.next[s]++);
    }
  }
  RETURN_IF_ERROR(p.error);
  // Each pulled part goes into the variables as it arrives, while later parts are on the wire;
  // its frames are released with the reply.
  Status copied = Status::OK();
  auto copy_in = [&](size_t i, const Message& reply) {
    const StepParts::Sent& what = p.sent[i];
    if (!what.pull || !copied.ok()) return;
    const std::vector<replication::Partition>& partitions =
        p.plan[what.server][what.part].partitions;
    if (reply.tensors.size() != partitions.size()) {
      copied = Internal(ServerName(what.server) + " answered a pull of " +
                        std::to_string(partitions.size()) + " partitions with " +
                        std::to_string(reply.tensors.size()) + " tensors");
      return;
    }
    for (size_t j = 0; j < partitions.size(); ++j) {
      const replication::Partition& q = partitions[j];
      const Tensor& got = reply.tensors[j].tensor;
      Variable* v = p.owners[what.server][what.part][j];
      if (reply.tensors[j].name != q.key || got.shape() != q.shape) {
        copied = Internal(ServerName(what.server) + " answered the pull of '" + q.key + "' " +
                          q.shape.ToString() + " with '" + reply.tensors[j].name + "' " +
                          got.shape().ToString());
        return;
      }
      const int64_t rows = v->value.shape().rank() ? v->value.dim(0) : 1;
      std::memcpy(v->value.data() + q.row_begin * (v->value.size() / rows), got.data(),
                  got.bytes());
    }
  };
  ASSIGN_OR_RETURN(std::vector<Message> replies,
                   router_->Await(p.flight.get(), kStepTimeout, copy_in));
  p.flight.reset();
  RETURN_IF_ERROR(copied);
  PushPullResult result;
  for (size_t i = 0; i < replies.size(); ++i) {
    const StepParts::Sent& what = p.sent[i];
    if (!what.pull) result.dropped |= replies[i].value < 0;
    // Server 0's answer to the pull after its last part: the step this worker's push closed.
    if (what.pull && what.server == 0) result.global_step = replies[i].step;
  }
  NoteStepAcknowledged(result.global_step);
  return result;
}

}  // namespace worker
}  // namespace pstrain
