// Intra-node sync: the workers on one host (one per GPU) average their gradients with a
// collective, and only the host's leader (its lowest worker task) talks to the parameter
// servers: one push of the host's average, one pull, whose values are broadcast back to the
// other ranks. Servers see one worker per host, and the bytes on the network fall by the number
// of workers per host. (BytePS instead has each rank push its reduce-scatter share; that spreads
// the pushes over several NICs, which pays on hosts with one NIC per GPU. With the one NIC of
// the hosts we target, one push per host moves the same bytes with fewer, larger messages.)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "worker/collectives/bucketing.h"
#include "worker/collectives/collectives.h"
#include "worker/layer.h"
#include "worker/ps_client.h"

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

class HostSync {
 public:
  // `collectives` spans the host's workers (rank = local rank; rank 0 is the leader). Every
  // rank calls every method, in the same order; the tensors' data live where `collectives`
  // works (host or device memory).
  HostSync(Collectives* collectives, SyncTensors tensors, BucketOptions buckets = {});

  bool is_leader() const { return collectives_->rank() == 0; }

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

  Collectives* collectives_;
  SyncTensors tensors_;
  std::vector<Bucket> averaged_buckets_, shared_buckets_;
};

}  // namespace worker
}  // namespace pstrain
