// ServerTask's sockets (ps/server_task.h): the serving loop over the server socket and the
// connections to other server tasks, waited on together. The routing and the map are in
// ps/server_task.cc, socket-free.
#include <glog/logging.h>

#include <algorithm>
#include <set>
#include <utility>

#include "common/process_memory.h"
#include "common/wire/poller.h"
#include "common/wire/refusal_log.h"
#include "common/wire/same_host.h"
#include "ps/server_task.h"
#include "ps/state_digest.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

wire::Connection* ServerTask::ConnectionTo(int task) {
  auto it = connections_.find(task);
  if (it != connections_.end()) return it->second.get();
  if (task < 0 || task == self() || static_cast<size_t>(task) >= options_.ps_hosts.size()) {
    LOG(ERROR) << "ps " << self() << ": a request to ps task " << task
               << ", which is no other server of --ps_hosts: dropped";
    return nullptr;
  }
  // Its own ps-<t> key; the same-host socket where the target is on loopback.
  Result<wire::ServerRoute> route =
      wire::RouteToServer(options_.keys, task, options_.ps_hosts[task]);
  Result<std::unique_ptr<wire::Connection>> conn =
      route.ok() ? wire::Connection::Connect(route->endpoint, options_.limits, route->security)
                 : Result<std::unique_ptr<wire::Connection>>(route.status());
  if (!conn.ok()) {
    PSTRAIN_REFUSAL_WARNING("ps-connect:" + std::to_string(task),
                            "ps " + std::to_string(self()) + ": cannot reach ps " +
                                std::to_string(task) + ": " + conn.status().ToString());
    return nullptr;
  }
  VLOG(1) << "ps " << self() << ": connects to ps " << task << " at " << (*conn)->endpoint();
  return (connections_[task] = std::move(conn).value()).get();
}

void ServerTask::SendToTask(int task, const Message& request) {
  wire::Connection* conn = ConnectionTo(task);
  if (conn == nullptr) return;
  std::deque<Message>& waiting = backlog_[task];
  if (!waiting.empty()) {
    waiting.push_back(request);
    return;
  }
  Status s = conn->TrySend(request);
  if (s.code() == StatusCode::kResourceExhausted) {
    PSTRAIN_REFUSAL_WARNING("ps-full:" + std::to_string(task),
                            "ps " + std::to_string(self()) + ": ps " + std::to_string(task) +
                                " takes nothing (slow, or gone): its requests wait here");
    waiting.push_back(request);
  } else if (!s.ok()) {
    PSTRAIN_REFUSAL_WARNING("ps-send:" + std::to_string(task),
                            "ps " + std::to_string(self()) + ": " +
                                wire::MessageTypeName(request.type) + " to ps " +
                                std::to_string(task) + " failed: " + s.ToString());
    // Refused (its key) or broken: a fresh connection next time.
    if (s.code() == StatusCode::kFailedPrecondition) connections_.erase(task);
  }
}

bool ServerTask::FlushBacklogs() {
  bool waits = false;
  for (auto it = backlog_.begin(); it != backlog_.end();) {
    auto conn = connections_.find(it->first);
    std::deque<Message>& waiting = it->second;
    while (conn != connections_.end() && !waiting.empty()) {
      Status s = conn->second->TrySend(waiting.front());
      if (s.code() == StatusCode::kResourceExhausted) break;
      if (!s.ok()) {
        PSTRAIN_REFUSAL_WARNING("ps-send:" + std::to_string(it->first),
                                "ps " + std::to_string(self()) + ": to ps " +
                                    std::to_string(it->first) + ": " + s.ToString());
        if (s.code() == StatusCode::kFailedPrecondition) connections_.erase(conn);
        break;
      }
      waiting.pop_front();
    }
    if (conn == connections_.end() || connections_.count(it->first) == 0) waiting.clear();
    waits = waits || !waiting.empty();
    it = waiting.empty() ? backlog_.erase(it) : std::next(it);
  }
  return waits;
}

void ServerTask::ForgetTasksOutside(const replication::ShardMap& map) {
  std::set<int> in_map;
  for (int s = 0; s < map.num_shards(); ++s) {
    in_map.insert(map.chains[s].begin(), map.chains[s].end());
    in_map.insert(map.joining[s].begin(), map.joining[s].end());
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (in_map.count(it->first)) {
      ++it;
      continue;
    }
    VLOG(1) << "ps " << self() << ": closes its connection to ps " << it->first
            << " (in no chain at map epoch " << map.epoch << ")";
    backlog_.erase(it->first);
    it = connections_.erase(it);
  }
}

void ServerTask::Send(std::vector<Outgoing> out) {
  Stamp(&out);
  for (const Outgoing& o : out) {
    if (o.task >= 0) {
      SendToTask(o.task, o.message);
      continue;
    }
    Status s = socket_->Reply(o.peer, o.message);
    if (!s.ok()) {  // a peer gone, or one that reads nothing: logged once a while
      PSTRAIN_REFUSAL_WARNING("ps-reply:" + o.peer,
                              "ps " + std::to_string(self()) + ": reply failed: " + s.ToString());
    }
  }
}

void ServerTask::ReceiveServerReplies(int task) {
  auto it = connections_.find(task);
  // At most this many a turn: a peer sending replies nobody asked for cannot keep the loop from
  // the server socket (the rest wait for the next turn).
  constexpr int kMaxRepliesPerTurn = 64;
  for (int n = 0; it != connections_.end() && n < kMaxRepliesPerTurn; ++n) {
    Result<Message> reply = it->second->Receive(std::chrono::milliseconds(0));
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kUnavailable) return;  // nothing more for now
      PSTRAIN_REFUSAL_WARNING("ps-receive:" + std::to_string(task),
                              "ps " + std::to_string(self()) + ": from ps " + std::to_string(task) +
                                  ": " + reply.status().ToString());
      if (reply.status().code() == StatusCode::kFailedPrecondition) connections_.erase(it);
      return;
    }
    Send(HandleServerReply(task, *reply));
    it = connections_.find(task);  // a reply's handling may have dropped the connection
  }
}

ServerStats ServerTask::TotalStats() const {
  ServerStats total = own_stats_;
  for (const auto& [s, server] : shards_) total += server->stats();
  return total;
}

void ServerTask::WriteSummary(ServerSummary* summary, std::chrono::steady_clock::time_point now) {
  ServerHighs highs;
  size_t pending = 0;
  for (auto& [s, server] : shards_) {
    const ServerHighs h = server->TakeHighs();
    highs.apply_nanos = std::max(highs.apply_nanos, h.apply_nanos);
    highs.staleness = std::max(highs.staleness, h.staleness);
    highs.pending = std::max(highs.pending, h.pending);
    pending += server->pending_requests();
  }
  ParameterServer* own = shard(self());
  summary->Write(TotalStats(), highs, own ? own->global_step() : 0, pending, now);
}

namespace {

// "worker 1" for the key name "worker-1", as the server's other lines name roles.
std::string RoleAndTask(const std::string& name) {
  const size_t dash = name.rfind('-');
  return dash == std::string::npos ? name : name.substr(0, dash) + " " + name.substr(dash + 1);
}

}  // namespace

void ServerTask::LogCut(const wire::CutConnection& cut) const {
  const std::string host = cut.peer.substr(0, cut.peer.rfind(':'));
  std::string who = RoleAndTask(cut.identity);
  if (cut.identity.empty() && cut.keys_from_host.empty()) {
    who = "a peer that finished no message";
  } else if (cut.identity.empty()) {
    who = "a peer that finished no message (keys let in from " + host + ":";
    for (const std::string& name : cut.keys_from_host) who += " " + RoleAndTask(name) + ",";
    who.back() = ')';
  }
  PSTRAIN_REFUSAL_WARNING(
      "ps-cut:" + host,
      "ps " + std::to_string(self()) + ": cut the connection of " + who + " from " + cut.peer +
          " on " + cut.endpoint + ": ZeroMQ held " + std::to_string(cut.held_bytes >> 20) +
          " MiB from it not yet delivered (a message left unfinished), more than the " +
          std::to_string(cut.bound_bytes >> 20) +
          " MiB a peer of its key may make it hold (the largest message its role sends, with "
          "headroom, as logged at start); the guard's previous look was " +
          std::to_string(cut.since_previous_look.count()) + " ms before");
}

Status ServerTask::Step(std::chrono::milliseconds timeout, ServerSummary* summary) {
  for (auto& [s, server] : shards_) Send(server->TakeFinishedCheckpoints(false));
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_peer_check_) {
    // Peer silences, and with --min_workers what the live workers now release.
    for (auto& [s, server] : shards_) Send(server->CheckMembership(now));
    next_peer_check_ = now + std::chrono::milliseconds(500);
  }
  if (summary != nullptr && summary->Due(now)) WriteSummary(summary, now);
  // A peer's unfinished message wakes nothing here: look at the connections on a clock.
  for (const wire::CutConnection& cut : socket_->GuardConnections()) LogCut(cut);
  const auto until_guard = std::chrono::ceil<std::chrono::milliseconds>(
      socket_->next_guard() - std::chrono::steady_clock::now());
  timeout = std::clamp(until_guard, std::chrono::milliseconds(0), timeout);
  // While requests wait for room, look again soon (room is not something zmq_poll reports here).
  if (FlushBacklogs()) timeout = std::min(timeout, std::chrono::milliseconds(10));
  std::vector<int> tasks;
  std::vector<wire::Connection*> conns;
  for (auto& [t, c] : connections_) {
    tasks.push_back(t);
    conns.push_back(c.get());
  }
  ASSIGN_OR_RETURN(wire::PollResult ready, wire::Poll(socket_.get(), conns, timeout));
  for (size_t i : ready.connections) ReceiveServerReplies(tasks[i]);
  if (!ready.server) return Status::OK();
  Result<wire::Incoming> in = socket_->Receive(std::chrono::milliseconds(0));
  if (!in.ok()) {
    // Unavailable: only handshake events were waiting (read and logged by Receive).
    return in.status().code() == StatusCode::kUnavailable ? Status::OK() : in.status();
  }
  if (!in->message.ok()) {
    ++own_stats_.rejected;
    Message bad;  // the message could not be read, but its header may name the request
    bad.request_id = in->request_id;
    Send({{in->peer, Error(bad, InvalidArgument("malformed message refused: " +
                                                in->message.status().message()))}});
    return Status::OK();
  }
  Send(Handle(in->peer, in->message.value(), in->identity));
  return Status::OK();
}

void ServerTask::LogStopped() const {
  for (const auto& [s, server] : shards_) {
    // One shard (no replicas): the totals, this task's refusals included, as the server logged.
    const ServerStats st = shards_.size() == 1 ? TotalStats() : server->stats();
    LOG(INFO) << "ps " << self() << ": "
              << (shards_.size() == 1 && s == self() ? "" : "shard " + std::to_string(s) + " ")
              << "stopped at global step " << server->global_step() << " (" << st.pushes
              << " pushes, " << st.pulls << " pulls, " << st.updates << " updates, "
              << st.dropped_stale << " stale dropped, " << st.rejected << " rejected, "
              << st.refused << " refused to their senders' roles, " << st.duplicates
              << " retried pushes answered once"
              << (st.records_replicated + st.copies_sent > 0
                      ? ", " + std::to_string(st.records_replicated) + " records and " +
                            std::to_string(st.copies_sent) + " copies replicated (" +
                            std::to_string(st.bytes_replicated) + " tensor bytes)"
                      : "")
              << ")";
  }
  if (shards_.empty()) LOG(INFO) << "ps " << self() << ": stopped, holding no shard";
  if (map_.epoch == 0) return;
  // Each replica's state in one number: every member of a chain must end with its head's.
  for (const auto& [s, server] : shards_) {
    const auto& members = map_.chains[s];
    const bool member = std::find(members.begin(), members.end(), self()) != members.end();
    LOG(INFO) << "ps " << self() << ": shard " << s << " ("
              << (map_.head(s) == self() ? "head"
                  : member               ? "backup"
                                         : "joining")
              << ") at step " << server->global_step() << ": crc32c " << std::hex
              << StateCrc32c(server->store(), server->tables() ? server->tables()->all()
                                                               : std::vector<const SparseTable*>{})
              << std::dec
              << (server->tables() ? ", " + std::to_string(server->tables()->rows()) + " rows"
                                   : "");
  }
}

Status ServerTask::Serve(ServerSummary* summary) {
  LOG(INFO) << "ps " << self() << ": serving on " << socket_->endpoint() << " (allocating with "
            << AllocatorName() << ")";
  while (!shutdown_requested()) RETURN_IF_ERROR(Step(std::chrono::milliseconds(200), summary));
  // Drain: answer late requests for a moment (so that they fail fast, by name) and give
  // ZeroMQ's I/O thread time to deliver the shutdown reply before the process exits. The chief's
  // goodbye says it has that reply: every other worker passed the final barrier before it asked.
  const auto drain_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < drain_end) {
    Result<wire::Incoming> in = socket_->Receive(std::chrono::milliseconds(100));
    if (!in.ok() || !in->message.ok()) continue;
    const Message& late = in->message.value();
    if (late.type == MessageType::kHeartbeat && late.text == "goodbye" && late.role == "chief") {
      break;
    }
    Message error = Error(late, OutOfRange("shutting down: training is over"));
    if (!socket_->Reply(in->peer, error).ok()) break;
  }
  LogStopped();
  if (summary != nullptr) {  // the last interval, up to the shutdown
    WriteSummary(summary, std::chrono::steady_clock::now());
    if (Status s = summary->Close(); !s.ok()) {
      LOG(WARNING) << "ps " << self() << ": summaries: " << s.ToString();
    }
  }
  return Status::OK();
}

}  // namespace ps
}  // namespace pstrain
