// A worker's (or evaluator's) view of the parameter servers: one connection per server task,
// the sharding of every variable over the servers, and the requests of a training step. Gradients
// go out as slices of the model's own buffers (no copies); pulled values are copied once, into
// them.
//
// Faults: a heartbeat thread watches every server. A request to a server that restarts (or
// comes back after a silence) is sent again; pushes carry a sequence number, so a retried push
// is applied once. A server that restarted is initialised again by the chief from its current
// values (servers never restore on their own); other roles wait for that. A server unreachable
// for longer than the unavailable timeout fails the request, naming it.
//
// Checkpoints are one step across all shards (common/checkpoint/cluster_checkpoint.h): the chief
// commits a step once every server has answered that its shard file is durable, and at start
// restores the newest committed step every server holds whole on every server, or none.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/wire/transport.h"
#include "ps/sharding.h"
#include "worker/distributed/heartbeat.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

struct PushPullResult {
  int64_t global_step = 0;  // after the push, from PS task 0
  bool dropped = false;     // a server dropped the push as stale
};

class PsClient {
 public:
  // `variables` are placed with ps::Sharding over the servers; trainable ones are pushed as
  // gradients, the others (batch-norm moving statistics) as values to assign.
  static Result<std::unique_ptr<PsClient>> Connect(const std::vector<std::string>& ps_hosts,
                                                   const std::string& role, int task_index,
                                                   const std::vector<Variable*>& variables,
                                                   int64_t partition_bytes,
                                                   const wire::ClusterKeys& curve = {});

  struct Initialized {
    int kept = 0;                     // servers that kept the variables they held
    std::optional<int64_t> restored;  // the committed step every server restored
  };
  // Chief: brings every server to one state. When every server holds variables (only the chief
  // restarted) they keep them. Otherwise, if `train_dir` has a committed step that every server
  // holds whole, every server restores that step, one that kept running too, so that no shard is
  // at another step; if not, servers without variables get this chief's values at `step`.
  Result<Initialized> Initialize(int64_t step, const std::string& train_dir = "");
  // Non-chief: waits (retrying with backoff) until every server has its variables.
  Status WaitUntilInitialized(std::chrono::seconds timeout);
  // Copies the servers' values into the variables; returns the global step.
  Result<int64_t> Pull();
  // Pushes the gradients (and state) computed at `step` and pulls the new values, with both
  // requests to every server in flight together.
  Result<PushPullResult> PushAndPull(int64_t step);
  // Blocks until `participants` callers reached barrier `name` (on PS task 0).
  Status Barrier(const std::string& name, int participants);
  // Chief: every server saves its shard at `step` under `train_dir`; once every one has answered
  // that its file is durable, the step is committed in <train_dir>/committed_checkpoints. A step
  // that any server failed to save is not committed (and the error names the server).
  Status Checkpoint(int64_t step, const std::string& train_dir);
  // Chief: tells every server to exit.
  Status Shutdown();

  const ps::Sharding& sharding() const { return sharding_; }
  // What the heartbeats say of server `s`.
  HeartbeatMonitor::Health ServerHealth(int s) const { return heartbeat_->Of(s); }
  // How long requests wait for a server that is down before failing (default 10 minutes).
  void set_unavailable_timeout(std::chrono::seconds t) { unavailable_timeout_ = t; }

 private:
  PsClient() = default;
  wire::Message Request(wire::MessageType type) const;
  // Sends one request per (server, message) and collects the replies in the same order.
  Result<std::vector<wire::Message>> Exchange(const std::vector<std::pair<int, wire::Message>>& out,
                                              std::chrono::milliseconds timeout);
  void CopyIn(const std::vector<wire::Message>& replies);
  // The chief's register for server `s`: the current values of its partitions.
  wire::Message InitMessage(int s, int64_t step) const;
  std::string Who() const { return role_ + " " + std::to_string(task_index_); }
  std::string ServerName(int s) const;

  std::string role_;
  int task_index_ = 0;
  std::vector<std::unique_ptr<wire::Connection>> servers_;
  std::vector<Variable*> variables_;
  ps::Sharding sharding_;
  std::vector<std::string> hosts_;
  uint64_t next_id_ = 1;
  std::vector<uint64_t> push_sequence_;  // per server
  int64_t last_step_ = 0;                // the global step of the last pull
  std::unique_ptr<HeartbeatMonitor> heartbeat_;
  std::chrono::seconds unavailable_timeout_{600};
};

}  // namespace worker
}  // namespace pstrain
