#include "worker/host_sync.h"

#include <cstring>
#include <map>

namespace pstrain {
namespace worker {

Result<HostGroup> HostGroupOf(const std::vector<std::string>& worker_hosts, int task_index) {
  if (task_index < 0 || task_index >= static_cast<int>(worker_hosts.size())) {
    return InvalidArgument("worker task " + std::to_string(task_index) + " is out of range for " +
                           std::to_string(worker_hosts.size()) + " worker(s)");
  }
  std::vector<std::string> hosts;
  for (const std::string& entry : worker_hosts) {
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("--worker_hosts entry '" + entry + "' is not host:port");
    }
    hosts.push_back(entry.substr(0, colon));
  }
  HostGroup group;
  group.host = hosts[task_index];
  for (int t = 0; t < static_cast<int>(hosts.size()); ++t) {
    if (hosts[t] != group.host) continue;
    if (t == task_index) group.local_rank = group.size();
    group.tasks.push_back(t);
  }
  return group;
}

HostSync::HostSync(Collectives* collectives, std::vector<Variable*> variables, PsClient* client,
                   BucketOptions buckets)
    : collectives_(collectives), variables_(std::move(variables)), client_(client) {
  std::vector<int64_t> sizes;
  // Backward produces the last layer's gradients first: bucket in that order.
  for (auto it = variables_.rbegin(); it != variables_.rend(); ++it) {
    Variable* v = *it;
    averaged_.push_back(v->trainable ? &v->grad : &v->value);
    sizes.push_back(averaged_.back()->size());
  }
  buckets_ = AssignBuckets(sizes, buckets).value();  // sizes are >= 0 and the cap is positive
}

namespace {
// The leader's outcome as floats, bit for bit (a broadcast copies bytes, it computes nothing):
// [ok, dropped, global step as 8 bytes].
constexpr int kOutcomeFloats = 4;
void PackOutcome(const Result<PushPullResult>& r, float* out) {
  out[0] = r.ok() ? 1.0f : 0.0f;
  out[1] = r.ok() && r->dropped ? 1.0f : 0.0f;
  const int64_t step = r.ok() ? r->global_step : 0;
  std::memcpy(out + 2, &step, sizeof(step));
}
}  // namespace

Result<PushPullResult> HostSync::Share(const Result<PushPullResult>& outcome) {
  float packed[kOutcomeFloats];
  if (client_ != nullptr) PackOutcome(outcome, packed);
  RETURN_IF_ERROR(collectives_->Broadcast(packed, kOutcomeFloats, /*root=*/0));
  if (packed[0] != 1.0f) {
    if (client_ != nullptr) return outcome.status();
    return Unavailable("rank " + std::to_string(collectives_->rank()) +
                       ": the host's leader (local rank 0) failed to exchange with the servers; "
                       "see its log");
  }
  for (Variable* v : variables_) {
    RETURN_IF_ERROR(collectives_->Broadcast(v->value.data(), v->value.size(), /*root=*/0));
  }
  PushPullResult r;
  r.dropped = packed[1] == 1.0f;
  std::memcpy(&r.global_step, packed + 2, sizeof(r.global_step));
  return r;
}

Result<int64_t> HostSync::Pull() {
  Result<PushPullResult> outcome = PushPullResult{};
  if (client_ != nullptr) {
    Result<int64_t> step = client_->Pull();
    if (step.ok()) {
      outcome->global_step = step.value();
    } else {
      outcome = step.status();
    }
  }
  ASSIGN_OR_RETURN(PushPullResult shared, Share(outcome));
  return shared.global_step;
}

Result<PushPullResult> HostSync::PushAndPull(int64_t step) {
  RETURN_IF_ERROR(AllReduceAverageBucketed(*collectives_, averaged_, buckets_));
  Result<PushPullResult> outcome = PushPullResult{};
  if (client_ != nullptr) outcome = client_->PushAndPull(step);
  return Share(outcome);
}

}  // namespace worker
}  // namespace pstrain
