#include "worker/distributed/host_sync.h"

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
    t.averaged.push_back(AveragedTensorOf(v, device));
    t.shared.push_back(device ? &v->device_value : &v->value);
  }
  return t;
}

std::vector<Bucket> BucketsOf(const std::vector<Tensor*>& tensors, const BucketOptions& options) {
  std::vector<int64_t> sizes;
  for (const Tensor* t : tensors) sizes.push_back(t->size());
  return AssignBuckets(sizes, options).value();  // sizes are >= 0; a bad cap is a caller's bug
}

}  // namespace

Tensor* AveragedTensorOf(Variable* v, bool device) {
  if (device) return v->trainable ? &v->device_grad : &v->device_value;
  return v->trainable ? &v->grad : &v->value;
}

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
      shared_buckets_(BucketsOf(tensors_.shared, buckets)) {
  for (size_t b = 0; b < averaged_buckets_.size(); ++b) {
    for (int index : averaged_buckets_[b].tensor_indices) {
      bucket_of_[tensors_.averaged[index]] = static_cast<int>(b);
    }
  }
}

HostSync::~HostSync() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (communication_.joinable()) communication_.join();
}

void HostSync::StartBackward() {
  std::lock_guard<std::mutex> lock(mutex_);
  CHECK(!overlapping_) << "StartBackward twice without PushAndPull";
  overlapping_ = true;
  missing_.clear();
  for (const Bucket& b : averaged_buckets_) missing_.push_back(b.tensor_indices.size());
  waits_.assign(averaged_buckets_.size(), nullptr);
  next_to_enqueue_ = 0;
  averaged_count_ = 0;
  overlap_status_ = Status::OK();
  if (!communication_.joinable()) communication_ = std::thread([this] { CommunicationLoop(); });
  EnqueueCompleteBuckets();  // buckets without tensors
}

void HostSync::Ready(const Tensor* tensor, std::function<Status()> wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!overlapping_) return;
  auto it = bucket_of_.find(tensor);
  CHECK(it != bucket_of_.end()) << "HostSync::Ready: a tensor this HostSync does not average";
  const int b = it->second;
  CHECK_GT(missing_[b], 0) << "HostSync::Ready: a tensor marked twice";
  if (--missing_[b] == 0) waits_[b] = std::move(wait);
  EnqueueCompleteBuckets();
}

void HostSync::EnqueueCompleteBuckets() {
  const int n = static_cast<int>(averaged_buckets_.size());
  bool any = false;
  while (next_to_enqueue_ < n && missing_[next_to_enqueue_] == 0) {
    queue_.push_back(next_to_enqueue_++);
    any = true;
  }
  if (any) changed_.notify_all();
}

void HostSync::CommunicationLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int b = queue_.front();
    queue_.pop_front();
    std::function<Status()> wait = std::move(waits_[b]);
    const bool failed = !overlap_status_.ok();
    lock.unlock();
    // After a failure the remaining buckets are only counted and this rank fails the step.
    // Through the hub the other ranks learn of it (their calls fail by heartbeat or timeout);
    // NCCL peers are not told (no communicator abort yet) and wait.
    Status status;
    if (!failed) {
      if (wait) status = wait();
      if (status.ok()) {
        status = AllReduceAverageBucketed(*collectives_, tensors_.averaged, {averaged_buckets_[b]});
      }
      if (status.ok() && on_averaged_) {
        for (int index : averaged_buckets_[b].tensor_indices) {
          on_averaged_(tensors_.averaged[index]);
        }
      }
    }
    lock.lock();
    if (!status.ok() && overlap_status_.ok()) {
      overlap_status_ = status.WithContext("gradient bucket " + std::to_string(b));
    }
    ++averaged_count_;
    changed_.notify_all();
  }
}

Status HostSync::FinishOverlappedAverage() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (int& m : missing_) m = 0;  // what backward did not mark (a layer it skipped) goes now
  EnqueueCompleteBuckets();
  changed_.wait(lock,
                [&] { return averaged_count_ == static_cast<int>(averaged_buckets_.size()); });
  overlapping_ = false;
  return overlap_status_;
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
  bool overlapped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    overlapped = overlapping_;
  }
  if (overlapped) {
    RETURN_IF_ERROR(FinishOverlappedAverage());
  } else {
    RETURN_IF_ERROR(AllReduceAverageBucketed(*collectives_, tensors_.averaged, averaged_buckets_));
  }
  Result<PushPullResult> outcome = PushPullResult{};
  if (is_leader()) outcome = leader_exchange();
  return Share(outcome);
}

}  // namespace worker
}  // namespace pstrain
