// Intra-node sync: the workers on one host (one per GPU) average their gradients with a
// collective, and only the host's leader (its lowest worker task) talks to the parameter
// servers: one push of the host's average, one pull, whose values are broadcast back to the
// other ranks. Servers see one worker per host, and the bytes on the network fall by the number
// of workers per host. (BytePS instead has each rank push its reduce-scatter share; that spreads
// the pushes over several NICs, which pays on hosts with one NIC per GPU. With the one NIC of
// the hosts we target, one push per host moves the same bytes with fewer, larger messages.)
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "worker/distributed/collectives/bucketing.h"
#include "worker/distributed/collectives/collectives.h"
#include "worker/network/layer.h"
#include "worker/distributed/ps_client.h"

namespace pstrain {
namespace worker {

// The workers that share this worker's host (the host part of --worker_hosts), and its place.
struct HostGroup {
  std::string host;
  std::vector<int> tasks;  // worker task indices on the host, ascending
  int local_rank = 0;      // this worker's position in `tasks`
  int size() const { return static_cast<int>(tasks.size()); }
  int leader() const { return tasks.front(); }
  bool is_leader() const { return local_rank == 0; }
};

// InvalidArgument for a task index out of range or an entry without host:port.
Result<HostGroup> HostGroupOf(const std::vector<std::string>& worker_hosts, int task_index);

// The tensors a HostSync moves: `averaged` (trainable variables' gradients, other variables'
// values such as batch-norm statistics) are averaged over the ranks before the leader's
// exchange with the servers; `shared` (every variable's value) are then copied from the leader
// to every rank. Both lists are in backward order (last layer first), the order backward
// finishes them in.
struct SyncTensors {
  std::vector<Tensor*> averaged, shared;
};
// The variables' host tensors (CPU workers, or GPU workers syncing through host memory).
SyncTensors HostTensorsOf(const std::vector<Variable*>& variables);
// Their device mirrors (GPU workers syncing over NCCL).
SyncTensors DeviceTensorsOf(const std::vector<Variable*>& variables);
// The tensor of `v` that is averaged: its gradient when trainable, else its value.
Tensor* AveragedTensorOf(Variable* v, bool device);

class HostSync {
 public:
  // `collectives` spans the host's workers (rank = local rank; rank 0 is the leader). Every
  // rank calls every method, in the same order; the tensors' data live where `collectives`
  // works (host or device memory).
  HostSync(Collectives* collectives, SyncTensors tensors, BucketOptions buckets = {});

  ~HostSync();
  HostSync(const HostSync&) = delete;
  HostSync& operator=(const HostSync&) = delete;

  bool is_leader() const { return collectives_->rank() == 0; }

  // Overlap with backward (PyTorch DDP's gradient hooks, Horovod's background thread): call
  // StartBackward() before Backward and Ready() as backward finishes each averaged tensor; a
  // bucket is averaged on a thread of its own as soon as all its tensors are ready, while
  // backward goes on. `wait` (optional) blocks until the tensor's data is really there (a GPU
  // event after the kernels that write it). PushAndPull then averages what was not marked and
  // waits for all buckets. Without StartBackward, PushAndPull averages everything itself.
  void StartBackward();
  void Ready(const Tensor* tensor, std::function<Status()> wait = {});
  // The leader's overlapped push: `averaged` is called on the communication thread for each
  // tensor of a bucket, in the bucket's order, as soon as the bucket's average is done, so that
  // the leader can push it while backward goes on. Set before the first StartBackward.
  void set_on_averaged(std::function<void(const Tensor*)> averaged) {
    on_averaged_ = std::move(averaged);
  }

  // The leader runs `leader_pull` (its pull from the servers); every rank then receives the
  // leader's values and the global step.
  Result<int64_t> Pull(const std::function<Result<int64_t>()>& leader_pull);
  // Averages the `averaged` tensors over the ranks; the leader runs `leader_exchange` (its push
  // of the average and pull of the new values); every rank then receives the leader's values
  // and outcome. If the leader's exchange fails, every rank fails (naming the leader), none
  // waits forever.
  Result<PushPullResult> PushAndPull(
      const std::function<Result<PushPullResult>()>& leader_exchange);

 private:
  // The leader's `outcome` (or error) and the shared values, from the leader to every rank.
  Result<PushPullResult> Share(const Result<PushPullResult>& outcome);

  // Hands every complete bucket, in order, to the communication thread (mutex_ held).
  void EnqueueCompleteBuckets();
  // Waits until the communication thread has averaged every bucket of this step.
  Status FinishOverlappedAverage();
  void CommunicationLoop();

  Collectives* collectives_;
  SyncTensors tensors_;
  std::vector<Bucket> averaged_buckets_, shared_buckets_;
  std::function<void(const Tensor*)> on_averaged_;

  // Overlap state; the communication thread starts with the first StartBackward.
  std::unordered_map<const Tensor*, int> bucket_of_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool overlapping_ = false;                    // between StartBackward and PushAndPull
  std::vector<int> missing_;                    // per bucket: tensors not yet ready
  std::vector<std::function<Status()>> waits_;  // per bucket: what to wait for before reading
  int next_to_enqueue_ = 0;
  std::deque<int> queue_;   // buckets for the thread, in order
  int averaged_count_ = 0;  // buckets the thread finished this step
  Status overlap_status_;   // the first failure of this step
  bool stop_ = false;
  std::thread communication_;
};

}  // namespace worker
}  // namespace pstrain
