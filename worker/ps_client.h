// A worker's (or evaluator's) view of the parameter servers: one connection per server task,
// the placement of every variable, and the requests of a training step. Gradients go out as
// slices of the model's own buffers (no copies); pulled values are copied once, into them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/wire/transport.h"
#include "ps/placement.h"
#include "worker/layer.h"

namespace pstrain {
namespace worker {

struct PushPullResult {
  int64_t global_step = 0;  // after the push, from PS task 0
  bool dropped = false;     // a server dropped the push as stale
};

class PsClient {
 public:
  // `variables` are placed with ps::Placement over the servers; trainable ones are pushed as
  // gradients, the others (batch-norm moving statistics) as values to assign.
  static Result<std::unique_ptr<PsClient>> Connect(const std::vector<std::string>& ps_hosts,
                                                   const std::string& role, int task_index,
                                                   const std::vector<Variable*>& variables,
                                                   int64_t partition_bytes);

  // Chief: sends every server the initial values of its partitions. Servers that restored a
  // checkpoint keep theirs. Returns how many servers kept restored values.
  Result<int> Initialize(int64_t step);
  // Non-chief: waits (retrying with backoff) until every server has its variables.
  Status WaitUntilInitialized(std::chrono::seconds timeout);
  // Copies the servers' values into the variables; returns the global step.
  Result<int64_t> Pull();
  // Pushes the gradients (and state) computed at `step` and pulls the new values, with both
  // requests to every server in flight together.
  Result<PushPullResult> PushAndPull(int64_t step);
  // Blocks until `participants` callers reached barrier `name` (on PS task 0).
  Status Barrier(const std::string& name, int participants);
  // Chief: every server saves its shard at `step` under `train_dir`.
  Status Checkpoint(int64_t step, const std::string& train_dir);
  // Chief: tells every server to exit.
  Status Shutdown();

  const ps::Placement& placement() const { return placement_; }

 private:
  PsClient() = default;
  wire::Message Request(wire::MessageType type) const;
  // Sends one request per (server, message) and collects the replies in the same order.
  Result<std::vector<wire::Message>> Exchange(const std::vector<std::pair<int, wire::Message>>& out,
                                              std::chrono::milliseconds timeout);
  void CopyIn(const std::vector<wire::Message>& replies);

  std::string role_;
  int task_index_ = 0;
  std::vector<std::unique_ptr<wire::Connection>> servers_;
  std::vector<Variable*> variables_;
  ps::Placement placement_;
  uint64_t next_id_ = 1;
};

}  // namespace worker
}  // namespace pstrain
