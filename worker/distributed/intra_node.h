// --intra_node_sync: how the workers on one host (the host part of --worker_hosts) combine
// their gradients before the servers see them.
//   off   every worker pushes and pulls on its own (TensorFlow's between-graph replication)
//   cpu   the host's workers average in host memory through the leader's hub (host_hub.h)
//   nccl  GPU workers, one per GPU, average on the devices over NCCL (the unique id travels
//         through the leader's hub)
// With cpu or nccl, only the host's leader (its lowest worker task) pushes the average and
// pulls; the others receive its values (host_sync.h). Servers then count one pusher per host,
// so every role of the cluster must get the same flag (the launcher's `flags:` does that).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "worker/distributed/collectives/collectives.h"
#include "worker/distributed/collectives/host_hub.h"
#include "worker/distributed/collectives/zmq_store.h"
#include "worker/distributed/host_sync.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

enum class IntraNodeSync { kOff, kCpu, kNccl };
// InvalidArgument naming the flag and the expected values.
Result<IntraNodeSync> ParseIntraNodeSync(const std::string& value);
const char* IntraNodeSyncName(IntraNodeSync mode);

// Workers that push to the servers: one per host with cpu or nccl, every worker with off.
int NumPushers(const std::vector<std::string>& worker_hosts, IntraNodeSync mode);

// A worker's membership of its host's sync group.
struct IntraNodeGroup {
  HostGroup group;
  IntraNodeSync mode = IntraNodeSync::kOff;
  std::unique_ptr<HostHub> hub;     // the leader's; null on the other ranks
  std::unique_ptr<ZmqStore> store;  // every rank's client of the hub's store
  std::unique_ptr<Collectives> collectives;
};

struct IntraNodeOptions {
  IntraNodeSync mode = IntraNodeSync::kOff;
  std::vector<std::string> worker_hosts;
  int task_index = 0;
  Device device = Device::kCpu;  // where this worker computes
  wire::ClusterKeys curve;       // the hub uses the cluster's CURVE keys when it has them
  bool insecure = false;         // --insecure: a plaintext hub may listen beyond loopback
  // What every rank of the host must agree on besides the mode: the model's name and the sizes
  // of what is averaged ("refnet, 10 variables, 3274634 floats").
  std::string model;
  // How long ranks wait for each other: to meet, and in a collective (the leader's exchange with
  // the servers included, so longer than --ps_unavailable_timeout_secs).
  std::chrono::milliseconds timeout{std::chrono::minutes(11)};
};

// Joins this worker's host group: the leader serves the hub on its --worker_hosts port, every
// rank checks that all chose the same mode, then the collectives are set up. Null when the mode
// is off or the worker is alone on its host. FailedPrecondition for nccl on a CPU worker or a
// binary without NCCL, and when the host's workers disagree.
Result<std::unique_ptr<IntraNodeGroup>> JoinIntraNodeGroup(const IntraNodeOptions& options,
                                                           const std::string& who);

}  // namespace worker
}  // namespace pstrain
