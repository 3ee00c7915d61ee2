// A parameter server task: holds its shard of the variables (given by the chief, or restored
// from the shard's checkpoint of the step the chief picks), answers pulls, applies pushed
// gradients by its update policy (async, accumulate or sync: ps/update_policy.h), keeps the global
// step (authoritative on task 0), saves checkpoints on request in the background
// (ps/shard_checkpoints.h).
//
// Requests are handled one at a time on the server's thread, so a pull never sees a partly
// applied update; optimizer loops use every core for large variables.
//
// Checkpoints are cluster-wide (common/checkpoint/cluster_checkpoint.h): a server never restores
// on its own at start, which would roll its shard back behind servers that kept running. It
// tells the chief in its register replies which steps it holds whole; the chief restores one
// step on every server, or, when only this server restarted under a live chief, gives it the
// chief's current values (PsClient::Exchange). Its optimizer slots then come from its newest
// whole checkpoint at or before that step: Adam's or RMSProp's second moments restarted at zero
// late in training make the first updates several times larger than the learning rate, while
// moments a few hundred steps old are close to the current ones.
//
// Replicated (--replicas > 0, docs/replication.md): once the owning ServerTask gives it a chain
// (SetChain), a head turns each update into a record for its successor and holds the replies
// the update justifies until the chain acknowledges it (ps/server_replication.cc); a backup
// applies the records with the head's optimizer and ends bitwise equal; a tail copies the shard
// to a joiner. Replies then report the committed step. Without a chain nothing changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"
#include "common/wire/transport.h"
#include "ps/barriers.h"
#include "ps/chain_intake.h"
#include "ps/data_ledger.h"
#include "ps/outgoing.h"
#include "ps/peer_state.h"
#include "ps/permissions.h"
#include "ps/push_admission.h"
#include "ps/record_checks.h"
#include "ps/record_signature.h"
#include "ps/replica_chain.h"
#include "ps/server_reply.h"
#include "ps/server_stats.h"
#include "ps/server_summary.h"
#include "ps/shard_checkpoints.h"
#include "ps/state_stamps.h"
#include "ps/table_shard.h"
#include "ps/update_mode.h"
#include "ps/update_policy.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

class Membership;

struct ServerOptions {
  int task_index = 0;
  int num_ps = 1;
  // The shard this state machine holds (-1: task_index's, as without replication). With
  // --replicas > 0 one task (ps/server_task.h) holds several shards, one ParameterServer each.
  int shard = -1;
  int replicas = 0;     // --replicas: backups per shard (docs/replication.md)
  int num_workers = 1;  // workers that push (one per host with intra-node sync)
  // The cluster's worker and evaluator tasks, bounding the task indices senders may claim and
  // counting who a barrier waits for (0 workers: unknown, in-process tests; not checked, and a
  // barrier waits for the count its first participant names).
  ClusterSize cluster;
  UpdateMode mode = UpdateMode::kAsync;
  int accumulate_n = 0;       // accumulate: pushes per update (0: the number of workers)
  int64_t max_staleness = 0;  // accumulate and sync
  int backup_workers = 0;     // sync: aggregate the first N - backup_workers of N
  std::string train_dir;      // shard checkpoints in <train_dir>/ps-<k>-of-<n>
  int max_to_keep = 5;
  // --min_workers: > 0 lets workers join and leave, N following the live ones (ps/membership.h);
  // 0: N is num_workers, fixed.
  int min_workers = 0;
  // A worker's new step must follow a pull from this server (ps/peer_state.h). The server
  // role turns it on; in-process tests that drive pushes alone leave it off.
  bool one_push_per_pull = false;
  // A push whose largest gradient element lies more than this many binades above its sender's
  // recent median (or the senders' median, if lower) is scaled down to that bound
  // (ps/magnitude_guard.h); 0: off. The server role sets --gradient_outlier_binades.
  int outlier_binades = 0;
  // A peer silent for this long (workers heartbeat every second) is logged as missing.
  std::chrono::milliseconds peer_timeout{5000};
  // Runs on the checkpoint writer's thread before each shard file is written (tests hold a save
  // open with it).
  std::function<void(int64_t step)> before_checkpoint_write;
  // Elastic data (docs/replication.md section 6): shard 0 keeps the data ledger when given the
  // examples per epoch (0: off, the modulo split; dataLease is refused as replication is).
  DataLedgerOptions data;
  // This task's ps-<t> keys (ServerTask sets them from its own; empty: plaintext): a head tags
  // its records with them, a replica checks its tag (ps/record_signature.h).
  wire::ClusterKeys keys;
};

// The shard's update policy works on it through UpdateShard, which it implements privately.
class ParameterServer : private UpdateShard {
 public:
  ParameterServer(ServerOptions options, std::unique_ptr<VariableStore> store);
  ~ParameterServer() override;

  using Outgoing = ps::Outgoing;

  // This shard's chain in the map of `epoch` (common/replication/shard_map.h), as the owning
  // ServerTask sees it: `tasks` head first, `joining` copying behind the tail, `self` this task.
  struct ChainView {
    uint64_t epoch = 0;
    std::vector<int> tasks;
    std::vector<int> joining;
    int self = -1;
  };
  // Takes the chain of a newer map (an older or equal epoch changes nothing): this shard's role
  // (head, middle, tail, joiner) and successor change; returns what that sends (records not yet
  // acknowledged to a new successor, a snapshot to a new joiner, held replies answered kAborted
  // when this task is no longer head, and the answers to records that waited for this map).
  // Records and copies reach Handle as requests of role "ps" from the sender's task, and are
  // taken only with ServerOptions::replicas > 0.
  std::vector<Outgoing> SetChain(const ChainView& chain);
  // A reply from server task `from_task` to a request this shard sent it (Outgoing::task): an
  // acknowledgement (`sequence`: the highest record every replica from that task on holds)
  // releases the replies waiting for it.
  std::vector<Outgoing> HandleServerReply(int from_task, const wire::Message& reply);
  // Joiners this shard, as the tail, has found caught up: it now waits for their
  // acknowledgements (the shardMap get reply lists them as caught up; docs/replication.md, 5).
  std::vector<int> CaughtUpJoiners() const;
  // Whether this shard is a joiner whose copy the head's stamp has verified (ps/state_stamps.h):
  // the chief makes a joiner a member only once it says so itself, whatever its tail says.
  bool CopyVerified() const { return chain_.joiner() && initialized_ && !stamps_.unverified(); }
  int shard() const { return options_.shard; }

  // Reads which steps this shard holds whole (setting damaged files aside, with a warning naming
  // each) and logs them; the chief picks the step to restore.
  void FindCheckpoints();
  // Restores this shard from its checkpoint of `step` (what the chief's restore request runs),
  // replacing the values it holds; its checkpoints of later steps are deleted.
  Status RestoreStep(int64_t step);
  // Replies to checkpoint requests whose files have become durable since the last call; with
  // `wait`, after every save in progress has finished. ServerTask::Serve sends them as they come.
  std::vector<Outgoing> TakeFinishedCheckpoints(bool wait);

  // Handles one request from the connection `peer`, authenticated as `identity` (the name of
  // its CURVE key, "worker-1"; empty in plaintext): a sender whose header disagrees with its key,
  // or whose role may not make the request (ps/permissions.h), is refused and nothing changes.
  // Returns the replies to send now (including deferred ones it releases).
  std::vector<Outgoing> Handle(const std::string& peer, const wire::Message& request,
                               const std::string& identity = "");

  // Logs every peer that has been silent for longer than the peer timeout (once per silence).
  // ServerTask::Serve calls it between requests; returns how many were newly found missing.
  int CheckPeers(std::chrono::steady_clock::time_point now);
  // CheckPeers; a head's record of no update to carry its state's stamp to a joiner of an idle
  // shard (ps/state_stamps.h); then, with --min_workers, what the live workers now release: a
  // sync window or barrier that waited for a worker gone, pushes held while too few were live.
  // ServerTask calls it between requests and sends what it returns (ps/server_membership.cc).
  std::vector<Outgoing> CheckMembership(std::chrono::steady_clock::time_point now);

  bool initialized() const { return initialized_; }
  bool shutdown_requested() const { return shutdown_; }
  int64_t global_step() const override { return global_step_; }
  const ServerStats& stats() const { return stats_; }
  // The highs since the last call, which starts a new interval.
  ServerHighs TakeHighs();
  const std::map<std::string, PeerState>& peers() const { return peers_; }
  // Requests held for a later reply (barrier waits, sync-mode pushes and pulls): at most a few
  // per sender of the cluster, whatever a sender sends.
  size_t pending_requests() const;
  const VariableStore& store() const { return *store_; }
  // The link this shard's next replication record must carry (common/wire/chain_link.h).
  const std::string& chain_link() const { return chain_.link(); }
  // For tests whose replicas all took the chief's initial values by register: in a cluster a
  // backup takes the head's copy, and the head's link with it.
  void TakeChainLinkForTest(const ParameterServer& head) {
    chain_.Reset(chain_.records(), global_step_, head.chain_link());
  }
  std::string ShardDir() const;
  // Shard 0's data ledger; null when elastic data is off (ServerOptions::data).
  const DataLedger* data_ledger() const { return ledger_.get(); }
  // This server's rows of the embedding tables (ps/table_shard.h), which row pulls and pushes
  // reach; without them (a config without `tables:`) those requests are refused.
  void SetTables(std::unique_ptr<TableShard> tables);
  const TableShard* tables() const { return tables_.get(); }

 private:
  // Handle without the traffic counts.
  std::vector<Outgoing> Dispatch(const std::string& peer, const wire::Message& request,
                                 const std::string& identity);
  // UpdateShard, for the update policy (ps/update_policy.h). Accumulated means are checked
  // again by Apply (a sum of finite floats can overflow).
  Status Apply(int64_t step, const NamedTensors& grads, VariableStore::Checked checked,
               NamedTensors* prepared) override;
  void NoteStaleness(int64_t computed_at) override;
  void CountUpdate() override;
  bool replicated() const override { return chain_.active(); }
  ServerStats& mutable_stats() override { return stats_; }
  wire::Message Ok(const wire::Message& request) const override {
    return Reply(request, wire::MessageType::kOk);
  }
  wire::Message Refusal(const wire::Message& request, const std::string& what) override {
    return Error(request, what);
  }
  wire::PushEntry RetryEntry(const wire::Message& request, const wire::Message& reply) override {
    return EntryOf(request, reply);
  }
  void RememberPush(const wire::Message& request, const wire::Message& reply,
                    bool in_window) override;
  void Commit(Update update, std::vector<HeldReply> replies,
              const std::vector<std::string>& pushers, std::vector<Outgoing>* out) override;
  // Replies and errors through ps/server_reply.h, reporting this shard's epoch and reply_step.
  ReplySource Source() const;
  wire::Message Reply(const wire::Message& request, wire::MessageType type) const;
  // A message of `type` from this process: role, task and incarnation set, nothing else.
  wire::Message FromThisServer(wire::MessageType type) const;
  // The step replies report: the committed one (the applied one without a chain).
  int64_t reply_step() const { return chain_.active() ? chain_.committed_step() : global_step_; }
  wire::Message Error(const wire::Message& request, const std::string& what,
                      StatusCode code = StatusCode::kInvalidArgument);
  // A refusal of a request its sender may not make: counted, logged without flooding.
  wire::Message Refuse(const wire::Message& request, const Status& why,
                       const std::string& identity);
  // Refuses a process older than one already heard from under the same name (a zombie, fenced
  // as ZooKeeper fences an expired session); otherwise records that `sender` is alive and logs
  // its return or restart.
  Status NotePeer(const std::string& sender, const wire::Message& request,
                  std::chrono::steady_clock::time_point now);
  // A push paced (ps/push_admission.h), then taken: held below --min_workers, or handled; either
  // uses the sender's pull.
  std::vector<Outgoing> TakePush(const std::string& peer, const wire::Message& request,
                                 const std::string& identity);
  // Whether a push of the same process and sequence as `request` is held below --min_workers.
  bool IsHeld(const wire::Message& request) const;
  // A retry of a push already taken: answered with the cached reply (`retry`'s), now, with the
  // open window's record, or once the record that answered it is acknowledged.
  std::vector<Outgoing> AnswerRetry(const std::string& peer, const wire::Message& request,
                                    const PushVerdict& retry);
  std::vector<Outgoing> HandleInit(const std::string& peer, const wire::Message& request);
  std::vector<Outgoing> HandlePull(const std::string& peer, const wire::Message& request);
  wire::Message PullReply(const wire::Message& request) override;
  std::vector<Outgoing> HandlePush(const std::string& peer, const wire::Message& request);
  std::vector<Outgoing> HandleBarrier(const std::string& peer, const wire::Message& request);
  // Whether a barrier's waiting participants are all it waits for (the cluster's count, or with
  // --min_workers every live worker; ps/server_membership.cc).
  bool BarrierComplete(const std::vector<Barriers::Wait>& waiting) const;
  // Replies OK to each released wait.
  void AnswerReleased(std::vector<Barriers::Wait> released, std::vector<Outgoing>* out) const;
  std::vector<Outgoing> HandleCheckpoint(const std::string& peer, const wire::Message& request);
  // Defined in ps/server_checkpoints.cc, with the checkpoint requests.
  wire::Message HandleRestore(const wire::Message& request);
  std::string RestoreSlots(int64_t step);  // after the chief's values: says where slots came from
  // After the chief's values: the table rows of the newest whole checkpoint at or before `step`
  // (the chief holds none to give); says where they came from.
  std::string RestoreTables(int64_t step);
  int required_pushes() const override;
  // Defined in ps/server_membership.cc. While fewer than --min_workers are live, holds an async
  // push (or refuses it into `out`); whether it took the push.
  bool HoldPush(const std::string& peer, const wire::Message& request, std::vector<Outgoing>* out);
  std::string Who(const wire::Message& m) const override;
  // Defined in ps/server_data_lease.cc, with the data ledger's requests.
  void StartDataLedger();
  std::vector<Outgoing> HandleDataLease(const std::string& peer, const wire::Message& request);
  // Defined in ps/server_rows.cc: row pulls and pushes, answered by the table shard.
  std::vector<Outgoing> HandleRows(const std::string& peer, const wire::Message& request);
  std::vector<Outgoing> HandleRowPush(const std::string& peer, const wire::Message& request);
  // A row push taken (applied or dropped stale): its retry-cache entry, and its pull spent.
  void NoteRowPush(const wire::Message& request);
  // Drops the rows untouched for their table's evict_after_steps, once per tenth of that.
  void EvictRows();
  // Accumulate and sync modes: the window of row pushes the global step has left, applied as
  // its mean (ps/row_window.h) and, replicated, recorded down the chain.
  void ApplyRowWindow(std::vector<Outgoing>* out);
  // A backup's record of a head's row push: the rows as they are after it, and its entry.
  // Fails, changing nothing, on anything but row tensors of this shard's tables.
  Status ApplyRowRecord(const wire::Message& record);
  // Whether `record` carries table rows (a head's row push), not dense gradients.
  static bool IsRowRecord(const wire::Message& record);
  // A push's `uses` (checked whole, all or nothing; kAborted for a revoked lease). OK and
  // ignored when the ledger is off, as before elastic data.
  Status RecordDataUses(const wire::Message& request);
  // A worker left or went missing (`restarted`: a new process of it; its old one is fenced).
  void ReleaseDataLeases(const std::string& who, bool restarted = false);

  // Replication (ps/server_replication.cc, docs/replication.md sections 3-5).
  // The retry-cache entry of `request`'s push answered by `reply`.
  static wire::PushEntry EntryOf(const wire::Message& request, const wire::Message& reply);
  // Makes the record of an update this head applied at `step` (the global step already
  // advanced, or not): sends it down the chain and returns its sequence; the caller holds the
  // replies it justifies with HoldUntil. `stamp_at`: the record carries a stamp of this time,
  // due or not (a record of no update, made for its stamp).
  int64_t Replicate(int64_t step, NamedTensors prepared, NamedTensors assigns,
                    std::vector<wire::PushEntry> pushes, std::vector<Outgoing>* out,
                    std::optional<std::chrono::steady_clock::time_point> stamp_at = {});
  void HoldUntil(int64_t sequence, const std::string& peer, const wire::Message& reply,
                 std::vector<Outgoing>* out);
  // Releases the replies whose records the chain has acknowledged.
  void Release(std::vector<Outgoing>* out);
  // kAborted for a request this shard is not the head for (a backup, a joiner).
  bool NotTheHead(const std::string& peer, const wire::Message& request,
                  std::vector<Outgoing>* out);
  std::vector<Outgoing> HandleReplicate(const std::string& peer, const wire::Message& record);
  // A checked record of dense gradients and assigns, applied as the head applied it.
  void ApplyDenseRecord(const wire::Message& record);
  // A record's fields and tensors, checked against this replica before anything changes
  // (ps/record_checks.h).
  Status CheckRecord(const wire::Message& record) const;
  std::vector<Outgoing> HandleReplicaCopy(const std::string& peer, const wire::Message& copy);
  // Whether a replication request may be taken now (ps/chain_intake.h): a refusal is answered
  // into `out`; a request of a newer map than this task's waits for it, answering nothing.
  bool CheckChainSender(const std::string& peer, const wire::Message& request,
                        std::vector<Outgoing>* out);
  // Sends `record` to server task `to`, counting its bytes.
  void SendRecord(wire::Message record, int to, std::vector<Outgoing>* out);
  // Tail: sends a copy of the shard to each joiner that has none.
  void CopyToJoiners(std::vector<Outgoing>* out);
  // A retry-cache entry installed from a record or a copy.
  void InstallPush(const wire::PushEntry& e, int64_t record);
  // Defined in ps/server_checkpoints.cc: the snapshot a tail sends a joiner, and its install.
  wire::Message Snapshot();
  Status InstallSnapshot(const wire::Message& copy);
  // The train config's fingerprint and the protocol version: replicas must agree.
  std::string Fingerprint() const;
  // Defined in ps/server_copy_check.cc: the head's stamps of the shard's state and their checks
  // (ps/state_stamps.h). The digest of this shard's state now.
  std::string StateDigest() const;
  // Whether a record the head makes at `now` carries a stamp.
  bool StampDue(std::chrono::steady_clock::time_point now) const;
  // The head, between requests: while a joiner is listed and no record carried a stamp for a
  // second, a record of no update to carry one (a joiner of an idle shard is verified too).
  void StampIdleShard(std::chrono::steady_clock::time_point now, std::vector<Outgoing>* out);
  // A replica, after applying a stamped record: compares its state. False: its copy was wrong
  // and is dropped, the refusal in `out`.
  bool CheckStamp(const std::string& peer, const wire::Message& record, std::vector<Outgoing>* out);
  // A joiner's copy found wrong: this shard holds nothing again, and waits for a new copy.
  void DropCopy();

  ServerOptions options_;
  std::unique_ptr<VariableStore> store_;
  bool initialized_ = false;
  bool shutdown_ = false;
  int64_t global_step_ = 0;  // updates applied here; task 0's is the cluster's global step
  std::unique_ptr<UpdatePolicy> policy_;  // when a push is applied, and whom to answer when
  struct Waiting {
    std::string peer;
    wire::Message request;
  };
  Barriers barriers_;  // by the cluster's size
  Peers peers_;        // by Who(): "worker 1"
  ServerStats stats_;
  ServerHighs highs_;
  std::unique_ptr<ShardCheckpoints> checkpoints_;
  std::map<uint64_t, Waiting> saving_;  // checkpoint requests by their save's ticket
  // Who counts (ps/membership.h), and the async pushes held below --min_workers.
  std::unique_ptr<Membership> membership_;
  std::vector<Waiting> held_pushes_;
  std::unique_ptr<DataLedger> ledger_;  // elastic data: shard 0 only, when given the data size
  // Replication: this shard's chain (inactive before a map: an unreplicated server).
  ReplicaChain chain_;
  RecordSignature signature_;  // the head's tags of each record, made here or checked
  StateStamps stamps_;         // the head's stamps of the state, made here or checked
  ChainIntake intake_;         // replication requests taken, refused, or waiting for a map
  PushAdmission admission_;    // a push's checks before the policy: pace, fields, retry, contents
  std::unique_ptr<TableShard> tables_;  // embedding-table rows this server owns, or null
  int64_t next_eviction_ = 0;           // the global step of the tables' next eviction
};

}  // namespace ps
}  // namespace pstrain
