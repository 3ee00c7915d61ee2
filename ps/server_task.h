// One parameter-server process (a task of --ps_hosts) and the shards it holds. Without replicas a
// task holds one shard, its own (shard s on task s), and this is a thin loop around that shard's
// ParameterServer, answering exactly as the server always did. With --replicas=k
// (docs/replication.md) a task holds every shard whose chain it heads,
// backs up or is joining, one ParameterServer state machine each, and:
//   - routes each request by its `shard` (-1: this task's own) to that shard's server; a worker's
//     or evaluator's request for a shard this task does not head in its map is answered kAborted
//     ("ps T: not the head of shard S at map epoch E (head: task H)") and changes nothing, so
//     the client fetches the map and goes to the head;
//   - answers shardMap itself: a get with its map (joiners a shard found caught up listed as
//     members), a set from the chief by adopting a newer epoch: shards newly held start empty,
//     shards no longer held are dropped, every shard learns its chain (ParameterServer::SetChain);
//   - passes heartbeats and shutdown to every shard it holds (each keeps its own peer table) and
//     answers once;
//   - stamps every reply with its map epoch (0 while it has no map);
//   - sends each shard's requests to other server tasks (records, snapshots) over one
//     connection per task, as role ps with its own ps-<t> key (the same-host socket where the
//     target is on loopback, as workers reach servers), and gives their replies back to the
//     shard that sent them (ParameterServer::HandleServerReply); a task slow or gone never
//     blocks the loop (its requests wait, in order, for room in its queue).
// The sockets are waited on together (wire::Poll), so a successor's acknowledgement never waits
// behind a client's request, and the reverse. Handle and HandleServerReply are socket-free, like
// ParameterServer::Handle, for tests.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/replication/shard_map.h"
#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"
#include "common/wire/transport.h"
#include "ps/server.h"
#include "ps/server_summary.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

struct ServerTaskOptions {
  // What every shard's server shares; task_index is this task, `shard` is set per shard.
  ServerOptions server;
  std::vector<std::string> ps_hosts;  // --ps_hosts: where the other server tasks listen
  wire::ClusterKeys keys;             // this task's ps-<t> keys (empty: plaintext)
  wire::MessageLimits limits;         // for the connections to other server tasks
  // An empty store for a shard this task takes on (the train config's optimizer and clipping).
  std::function<Result<std::unique_ptr<VariableStore>>()> new_store;
  // Shard s's rows of the embedding tables (ps/table_shard.h: the rows server s owns), given to
  // every shard this task holds, its own and those it is a replica of; empty when the config
  // has no tables.
  std::function<Result<std::unique_ptr<TableShard>>(int shard)> new_tables;
  // Tests: sees each reply from another server task before its shard does.
  std::function<void(int shard, int from_task, const wire::Message& reply)> on_server_reply;
};

class ServerTask {
 public:
  using Outgoing = ParameterServer::Outgoing;

  // Holds this task's own shard (reading which checkpoint steps it holds, for the chief). The
  // socket may be null for socket-free use (Handle); Send, Step and Serve need it.
  static Result<std::unique_ptr<ServerTask>> Create(ServerTaskOptions options,
                                                    std::unique_ptr<wire::ServerSocket> socket);
  ~ServerTask();

  // One request from the connection `peer`, authenticated as `identity` (as
  // ParameterServer::Handle): the replies to send, and requests to other server tasks
  // (Outgoing::task >= 0).
  std::vector<Outgoing> Handle(const std::string& peer, const wire::Message& request,
                               const std::string& identity = "");
  // A reply from server task `from_task` to a request one of this task's shards sent it; goes
  // to the shard it names (dropped, logged, when this task no longer holds that shard).
  std::vector<Outgoing> HandleServerReply(int from_task, const wire::Message& reply);

  // Sends `out`: replies on the socket, requests to other server tasks over their connections
  // (each made on first use). Failures are logged: a peer gone is the heartbeats' to find.
  void Send(std::vector<Outgoing> out);
  // One turn of the serving loop: finished checkpoints, peer checks, the summary when due, then
  // waits up to `timeout` for a request or another task's reply and handles what came.
  Status Step(std::chrono::milliseconds timeout, ServerSummary* summary = nullptr);
  // Serves until the chief's shutdown; writes `summary` (if any) on its interval and at the end.
  Status Serve(ServerSummary* summary = nullptr);

  const replication::ShardMap& map() const { return map_; }
  // The shard's server, or null when this task does not hold it.
  ParameterServer* shard(int s) const;
  std::vector<int> held_shards() const;
  bool shutdown_requested() const;
  wire::ServerSocket* socket() const { return socket_.get(); }

 private:
  ServerTask(ServerTaskOptions options, std::unique_ptr<wire::ServerSocket> socket);

  int self() const { return options_.server.task_index; }
  int num_shards() const { return options_.server.num_ps; }
  bool replicated() const { return options_.server.replicas > 0; }
  // Whether this task takes worker requests for shard `s` now.
  bool IsHead(int s) const;
  std::vector<Outgoing> Route(const std::string& peer, const wire::Message& request,
                              const std::string& identity);
  // Heartbeat and shutdown: every shard sees the request; the sender gets one reply.
  std::vector<Outgoing> ToEveryShard(const std::string& peer, const wire::Message& request,
                                     const std::string& identity);
  std::vector<Outgoing> HandleShardMap(const std::string& peer, const wire::Message& request,
                                       const std::string& identity);
  wire::Message MapReply(const wire::Message& request) const;
  // Takes `map` (a newer epoch, checked): creates and drops shards, tells each its chain.
  Result<std::vector<Outgoing>> Adopt(replication::ShardMap map);
  // Whether the sender may make `request` at all (ps/permissions.h); its fields fit its type,
  // as decoded (common/wire/codec.h).
  Status Admit(const wire::Message& request, const std::string& identity) const;
  // Replies and errors through ps/server_reply.h, reporting this task's epoch and its own
  // shard's step.
  ReplySource Source() const;
  wire::Message Reply(const wire::Message& request, wire::MessageType type) const;
  wire::Message Error(const wire::Message& request, const Status& why);
  // Replies carry the map epoch; requests to other tasks this task's name.
  void Stamp(std::vector<Outgoing>* out) const;
  // In order, never waiting: behind the ones already waiting for room in the task's queue.
  void SendToTask(int task, const wire::Message& request);
  // Sends what waits for room, as far as the queues take it; whether anything still waits.
  bool FlushBacklogs();
  // Closes the connections to tasks in no chain of the map (dead ones, NextMap's), dropping
  // what waits for them: the chains send a new successor what it lacks (SetChain).
  void ForgetTasksOutside(const replication::ShardMap& map);
  wire::Connection* ConnectionTo(int task);
  void ReceiveServerReplies(int task);
  // Logs a peer's connection that the socket cut for holding too much of an unfinished message.
  void LogCut(const wire::CutConnection& cut) const;
  ServerStats TotalStats() const;
  // Every shard's counts summed, their highs the highest; the step is this task's own shard's.
  void WriteSummary(ServerSummary* summary, std::chrono::steady_clock::time_point now);
  void LogStopped() const;

  ServerTaskOptions options_;
  std::unique_ptr<wire::ServerSocket> socket_;
  replication::ShardMap map_;               // epoch 0: none yet
  std::vector<wire::MapProof> map_proofs_;  // the chief's proofs of map_, passed on untouched
  std::map<int, std::unique_ptr<ParameterServer>> shards_;
  std::map<int, std::unique_ptr<wire::Connection>> connections_;  // by server task
  // Requests to a task whose queue was full (a task slow or gone): sent as room comes, in order,
  // so that a dead successor never blocks this thread (ZeroMQ would wait 60 s per send).
  std::map<int, std::deque<wire::Message>> backlog_;
  ServerStats own_stats_;  // requests refused before any shard saw them
  bool shutdown_ = false;  // a shutdown while this task held no shard
  std::chrono::steady_clock::time_point next_peer_check_;
};

}  // namespace ps
}  // namespace pstrain
