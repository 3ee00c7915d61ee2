// Intra-node sync: the workers on one host (one per GPU) average their gradients with a
// collective, and only the host's leader (its lowest worker task) talks to the parameter
// servers: one push of the host's average, one pull, whose values are broadcast back to the
// other ranks. Servers see one worker per host, and the bytes on the network fall by the number
// of workers per host. (BytePS instead has each rank push its reduce-scatter share; that spreads
// the pushes over several NICs, which pays on hosts with one NIC per GPU. With the one NIC of
// the hosts we target, one push per host moves the same bytes with fewer, larger messages.)
#pragma once

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

class HostSync {
 public:
  // `collectives` spans the host's workers (rank = local rank); `client` is the leader's
  // connection to the servers and null on the other ranks. Every rank calls every method, in
  // the same order.
  HostSync(Collectives* collectives, std::vector<Variable*> variables, PsClient* client,
           BucketOptions buckets = {});

  // The leader pulls; every rank receives the values and the global step.
  Result<int64_t> Pull();
  // Averages every rank's gradients (and batch-norm statistics, which are pushed as values);
  // the leader pushes them and pulls; every rank receives the new values and global step. If
  // the leader's exchange fails, every rank fails (naming the leader), none waits forever.
  Result<PushPullResult> PushAndPull(int64_t step);

 private:
  // The leader's `outcome` (or error) and the variables' values, from the leader to every rank.
  Result<PushPullResult> Share(const Result<PushPullResult>& outcome);

  Collectives* collectives_;
  std::vector<Variable*> variables_;
  PsClient* client_;
  std::vector<Tensor*> averaged_;  // gradients of trainable variables, values of the others
  std::vector<Bucket> buckets_;
};

}  // namespace worker
}  // namespace pstrain
