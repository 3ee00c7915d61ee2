// A worker's (or evaluator's) view of the parameter servers: one connection per server task,
// the sharding of every variable over the servers, and the requests of a training step. Gradients
// go out as slices of the model's own buffers (no copies; with --push_dtype=bf16 as rounded
// copies, their rounding error carried into the next step's push); pulled values are copied once,
// into them.
//
// Faults: a heartbeat thread watches every server, and RequestRouter (request_router.h) sends
// each request where it must go, again if it must, until its reply comes; this class says what
// the step sends. Pushes carry a sequence number, so a retried push is applied once. A server
// that restarted is initialised again by the chief from its current values (servers never
// restore on their own, and InitMessage is the chief's register); other roles wait for that.
//
// Overlapped push (async servers only; worker/distributed/push_parts.h): BeginStep, then
// Ready(variable) as backward finishes each layer (a host's leader: as the host's average of it
// is done, from HostSync's thread), then FinishStep. Each server's share of the
// model is cut into parts of about --push_part_mb, in the order backward finishes the variables
// (last layer first); a part leaves as soon as its variables are ready, followed by a pull of the
// same variables, so that pushes overlap backward and pulls of the last layers overlap the pushes
// of the first (the links are full duplex). A part says how many parts of its step are still to
// come (`value`), so that the server counts the step once; every part has its own sequence number,
// so a retried part is applied once. Pulled values are copied into the variables as each reply
// arrives, while later parts are still on the wire (PushAndPull copies them all at the end).
// A step's parts may leave in any order (the one sent last says that none is to come); when
// several are ready together, the ones nearest the input go first, as the next forward needs
// them first.
//
// Per-layer pulls (--pull_schedule per_layer or late, pull_schedule.h; with the overlapped push
// only): nothing is pulled after the parts; instead the step's pulls go out by layer, all at
// BeginStep or each at its AwaitLayer, and AwaitLayer(L), called before layer L's forward, waits
// only for L's; the push's parts then end where layers end, so each layer's update leaves as
// soon as backward has it. They share the step's requests with its pushes, so FinishStep still collects
// every reply; the global step comes from server 0's answer to the part that closes the step.
//
// Replicas (--replicas > 0, docs/replication.md section 4): shard s's requests carry `shard = s`
// and go to the head of its chain in the newest shard map this client knows (ShardRoutes,
// shard_routes.h, which RequestRouter follows). Push sequence numbers count per shard, the global
// step is shard 0's, barriers live on shard 0's head. The chief is the chain master (ShardMaster,
// shard_master.h), started by Initialize. Without replicas shard s is task s and no map exists.
//
// Checkpoints are one step across all shards (common/checkpoint/cluster_checkpoint.h): the chief
// commits a step once every server has answered that its shard file is durable, and at start
// restores the newest committed step every server holds whole on every server, or none.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/replication/sharding.h"
#include "common/wire/transport.h"
#include "worker/distributed/heartbeat.h"
#include "worker/distributed/pull_schedule.h"
#include "worker/distributed/push_dtype.h"
#include "worker/distributed/push_parts.h"
#include "worker/distributed/request_router.h"
#include "worker/distributed/shard_routes.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class ShardMaster;

struct PushPullResult {
  int64_t global_step = 0;  // after the push, from shard 0
  bool dropped = false;     // a server dropped the push as stale
};

class PsClient {
 public:
  // `variables` are placed with replication::Sharding over the servers; trainable ones are pushed
  // as gradients, the others (batch-norm moving statistics) as values to assign. `replicas` is
  // --replicas (0: no shard map; otherwise below the number of servers).
  static Result<std::unique_ptr<PsClient>> Connect(const std::vector<std::string>& ps_hosts,
                                                   const std::string& role, int task_index,
                                                   const std::vector<Variable*>& variables,
                                                   int64_t partition_bytes,
                                                   const wire::ClusterKeys& curve = {},
                                                   int replicas = 0);

  ~PsClient();

  struct Initialized {
    int kept = 0;                     // servers that kept the variables they held
    std::optional<int64_t> restored;  // the committed step every server restored
  };
  // Chief: brings every server to one state. With replicas it first starts the chain master,
  // which sends the epoch-1 map (or takes the servers' own, after a chief restart), and judges
  // by shard: a shard is held when its head holds it. When every server holds variables (only the
  // chief restarted) they keep them. Otherwise, if `train_dir` has a committed step that every
  // server holds whole, every server restores that step, one that kept running too, so that no
  // shard is at another step; if not, servers without variables get this chief's values at `step`.
  Result<Initialized> Initialize(int64_t step, const std::string& train_dir = "");
  // Non-chief: waits (retrying with backoff) until every server has its variables. With
  // `ended_when_gone`, servers that answered once and then stayed away for the unavailable timeout
  // mean the run is over: kOutOfRange, as from a server that says so (a role the end does not
  // wait for may miss that word between two tries).
  Status WaitUntilInitialized(std::chrono::seconds timeout, bool ended_when_gone = false);
  // Copies the servers' values into the variables; returns the global step.
  Result<int64_t> Pull();
  // Pushes the gradients (and state) computed at `step` and pulls the new values, with both
  // requests to every server in flight together.
  Result<PushPullResult> PushAndPull(int64_t step);
  // The overlapped push of one step (above): `part_bytes` > 0 enables it (Connect leaves it off).
  void set_push_part_bytes(int64_t part_bytes);
  int64_t push_part_bytes() const { return part_bytes_; }
  // Starts the step computed at `step`; nothing is sent yet.
  void BeginStep(int64_t step);
  // `v`'s gradient (or state, for a non-trainable variable) is final for this step: sends every
  // part of every server that this completes, in each server's order.
  Status Ready(const Variable* v);
  // The step's backward is over: noted in the step's timeline (step_timeline.h), where a part
  // pushed before it shows the push overlapping backward.
  void BackwardDone();
  // Sends the parts not sent yet and waits for every reply; the step's PushPullResult.
  Result<PushPullResult> FinishStep();
  // The step's pulls by layer (with the overlapped push on, before the first step); fails naming
  // a variable of no layer. `layers` in the model's order.
  Status set_pull_schedule(PullSchedule schedule, const std::vector<LayerVariables>& layers);
  PullSchedule pull_schedule() const;
  // Per-layer schedules, between BeginStep and FinishStep: before layer `layer`'s forward, its
  // values of this step are in its variables (late: its pulls are sent now). A layer without
  // variables returns at once.
  Status AwaitLayer(int layer);

  // --push_dtype: kBfloat16 pushes gradients in bfloat16 with error feedback (push_dtype.h) and
  // has the step's pulls answered in it; Pull (the start, the chief's final model, the
  // evaluator) stays float32. Values to assign (batch-norm statistics) are pushed in float32.
  void set_push_dtype(wire::TensorDType dtype) { push_dtype_ = dtype; }

  // Elastic data (--elastic_data): the chunk uses of the next step's examples, carried by its
  // push to server 0, whose data ledger records them (ps/data_ledger.h).
  void set_data_uses(std::vector<wire::ChunkUse> uses) { data_uses_ = std::move(uses); }

  // Blocks until `participants` callers reached barrier `name` (on shard 0's head).
  Status Barrier(const std::string& name, int participants);
  // Chief: every server saves its shard at `step` under `train_dir`; once every one has answered
  // that its file is durable, the step is committed in <train_dir>/committed_checkpoints. A step
  // that any server failed to save is not committed (and the error names the server).
  Status Checkpoint(int64_t step, const std::string& train_dir);
  // Chief: tells every server to exit.
  Status Shutdown();
  // Sends each request to the head of its shard (embedding rows go to the shard that owns them,
  // common/row_owner.h; with --replicas its head may be another task), with this client's
  // envelope, all at once through the router (retries, a server's restart, a head's failover);
  // the replies in the order sent.
  Result<std::vector<wire::Message>> ExchangeWithShards(
      std::vector<std::pair<int, wire::Message>> requests);

  const replication::Sharding& sharding() const { return sharding_; }
  // What the heartbeats say of server `s`.
  HeartbeatMonitor::Health ServerHealth(int s) const { return heartbeat_->Of(s); }
  // The highest global step the servers' heartbeat replies carried.
  int64_t HeardStep() const { return heartbeat_->highest_step(); }
  // The routes by shard (the shard map this client follows).
  const ShardRoutes& routes() const { return *routes_; }
  // The chief's chain master once Initialize started it (replicas only), else null.
  ShardMaster* shard_master() const { return master_.get(); }
  // How long requests wait for a server that is down before failing (default 10 minutes).
  void set_unavailable_timeout(std::chrono::seconds t) { router_->set_unavailable_timeout(t); }

 private:
  // One step's parts (overlapped_push.cc).
  struct StepParts;
  // Long enough for a sync step that waits on the slowest worker, or a restore on disks; the
  // rest wait on one round trip.
  static constexpr std::chrono::milliseconds kStepTimeout{300000};
  static constexpr std::chrono::milliseconds kShortTimeout{30000};

  PsClient();
  wire::Message Request(wire::MessageType type) const;
  // A step's pull (of every variable when `partitions` is empty), in --push_dtype.
  wire::Message StepPull(const std::vector<replication::Partition>& partitions = {}) const;
  Result<Initialized> InitializeShards(int64_t step, const std::string& train_dir);
  // Copies pulled values into the variables, once every one has its partition's shape.
  Status CopyIn(const std::vector<wire::Message>& replies);
  // A push of `partitions` of server `s` computed at `step` (trainable variables' gradients,
  // the others' values as assigns).
  wire::Message PushOf(int s, const std::vector<replication::Partition>& partitions, int64_t step);
  // Takes `plan` (push_parts.h) as the overlapped push's parts.
  void UseParts(std::vector<std::vector<PushPart>> plan);
  // Sends part `k` of server `s` (its push, then, with --pull_schedule=step, the pull of the
  // same partitions).
  Status SendPart(int s, size_t k);
  // Sends server `s`'s parts whose variables are all ready, nearest the input first.
  Status SendReadyParts(int s);
  // Per-layer pulls (layer_pulls.cc): sends pull `j` of the step's plan.
  Status SendLayerPull(size_t j);
  // Each reply of the step's requests as it is taken: a pull's values copied into the variables.
  void TakeStepReply(size_t i, const wire::Message& reply, Status* copied);
  // The chief's register for shard `s`: the current values of its partitions.
  wire::Message InitMessage(int s, int64_t step) const;
  std::string Who() const { return role_ + " " + std::to_string(task_index_); }
  std::string ServerName(int s) const { return router_->ServerName(s); }
  int num_servers() const { return static_cast<int>(hosts_.size()); }
  // A step's push answered by every shard that holds a partition: counted per shard (the
  // replication test compares each shard's final step with its workers' counts, logged at the
  // end), and the global step it brought checked never to go back.
  void NoteStepAcknowledged(int64_t global_step);

  std::string role_;
  int task_index_ = 0;
  std::vector<Variable*> variables_;
  replication::Sharding sharding_;
  std::vector<std::string> hosts_;
  wire::ClusterKeys curve_;
  std::vector<uint64_t> push_sequence_;  // per shard
  int64_t last_step_ = 0;                // the global step of the last pull
  // Declared before what it reads (the heartbeats, the routes), so that the request connections
  // close after the heartbeat monitor has said goodbye, as they always did.
  std::unique_ptr<RequestRouter> router_;
  std::unique_ptr<HeartbeatMonitor> heartbeat_;
  int64_t part_bytes_ = 0;            // 0: one push per server a step
  wire::TensorDType push_dtype_ = wire::TensorDType::kFloat32;
  ErrorFeedback error_feedback_;      // with bfloat16 pushes: each partition's rounding residual
  std::shared_ptr<StepParts> parts_;  // the overlapped step under way, if any
  // Elastic data: the uses the next push to server 0 carries.
  std::vector<wire::ChunkUse> data_uses_;
  std::vector<int64_t> acknowledged_steps_;  // per shard
  std::unique_ptr<ShardRoutes> routes_;
  // The chief's, with replicas; declared last so that it stops before what it uses goes.
  std::unique_ptr<ShardMaster> master_;
};

}  // namespace worker
}  // namespace pstrain
