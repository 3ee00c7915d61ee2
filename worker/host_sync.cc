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

namespace {

SyncTensors TensorsOf(const std::vector<Variable*>& variables, bool device) {
  SyncTensors t;
  for (auto it = variables.rbegin(); it != variables.rend(); ++it) {
    Variable* v = *it;
    Tensor* value = device ? &v->device_value : &v->value;
    Tensor* grad = device ? &v->device_grad : &v->grad;
    t.averaged.push_back(v->trainable ? grad : value);
    t.shared.push_back(value);
  }
  return t;
}

std::vector<Bucket> BucketsOf(const std::vector<Tensor*>& tensors, const BucketOptions& options) {
  std::vector<int64_t> sizes;
  for (const Tensor* t : tensors) sizes.push_back(t->size());
  return AssignBuckets(sizes, options).value();  // sizes are >= 0; a bad cap is a caller's bug
}

}  // namespace

SyncTensors HostTensorsOf(const std::vector<Variable*>& variables) {
  return TensorsOf(variables, /*device=*/false);
}

SyncTensors DeviceTensorsOf(const std::vector<Variable*>& variables) {
  return TensorsOf(variables, /*device=*/true);
}

HostSync::HostSync(Collectives* collectives, SyncTensors tensors, BucketOptions buckets)
    : collectives_(collectives),
      tensors_(std::move(tensors)),
      averaged_buckets_(BucketsOf(tensors_.averaged, buckets)),
      shared_buckets_(BucketsOf(tensors_.shared, buckets)) {}

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
  float packed[kOutcomeFloats] = {};
  if (is_leader()) PackOutcome(outcome, packed);
  RETURN_IF_ERROR(collectives_->BroadcastFromHost(packed, kOutcomeFloats, /*root=*/0));
  if (packed[0] != 1.0f) {
    if (is_leader()) return outcome.status();
    return Unavailable("rank " + std::to_string(collectives_->rank()) +
                       ": the host's leader (local rank 0) failed to exchange with the servers; "
                       "see its log");
  }
  RETURN_IF_ERROR(BroadcastBucketed(*collectives_, tensors_.shared, shared_buckets_, /*root=*/0));
  PushPullResult r;
  r.dropped = packed[1] == 1.0f;
  std::memcpy(&r.global_step, packed + 2, sizeof(r.global_step));
  return r;
}

Result<int64_t> HostSync::Pull(const std::function<Result<int64_t>()>& leader_pull) {
  Result<PushPullResult> outcome = PushPullResult{};
  if (is_leader()) {
    Result<int64_t> step = leader_pull();
    if (step.ok()) {
      outcome->global_step = step.value();
    } else {
      outcome = step.status();
    }
  }
  ASSIGN_OR_RETURN(PushPullResult shared, Share(outcome));
  return shared.global_step;
}

Result<PushPullResult> HostSync::PushAndPull(
    const std::function<Result<PushPullResult>()>& leader_exchange) {
  RETURN_IF_ERROR(AllReduceAverageBucketed(*collectives_, tensors_.averaged, averaged_buckets_));
  Result<PushPullResult> outcome = PushPullResult{};
  if (is_leader()) outcome = leader_exchange();
  return Share(outcome);
}

}  // namespace worker
}  // namespace pstrain
