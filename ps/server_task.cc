#include "ps/server_task.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "common/wire/shard_map_message.h"
#include "ps/permissions.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

namespace {

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The map a chief's set carries, checked as hostile input (wire::MapOfMessage): epoch 1 or
// more, one chain per shard, each task one of the cluster's, none twice in a chain.
Result<replication::ShardMap> MapOfRequest(const Message& request, int num_shards) {
  if (request.map_epoch == 0) {
    return InvalidArgument("a shard map set must carry map_epoch from 1 to 2^53, got 0");
  }
  return wire::MapOfMessage(request, num_shards, num_shards);
}

}  // namespace

ServerTask::ServerTask(ServerTaskOptions options, std::unique_ptr<wire::ServerSocket> socket)
    : options_(std::move(options)),
      socket_(std::move(socket)),
      next_peer_check_(std::chrono::steady_clock::now()) {
  if (options_.server.cluster.servers == 0) options_.server.cluster.servers = num_shards();
}

ServerTask::~ServerTask() = default;

Result<std::unique_ptr<ServerTask>> ServerTask::Create(ServerTaskOptions options,
                                                       std::unique_ptr<wire::ServerSocket> socket) {
  if (!options.new_store) return InvalidArgument("a server task needs new_store");
  ASSIGN_OR_RETURN(std::unique_ptr<VariableStore> store, options.new_store());
  options.server.keys = options.keys;  // a head tags its records, a replica checks them
  std::unique_ptr<ServerTask> task(new ServerTask(std::move(options), std::move(socket)));
  ServerOptions own = task->options_.server;
  own.shard = task->self();
  auto server = std::make_unique<ParameterServer>(own, std::move(store));
  if (task->options_.new_tables) {
    ASSIGN_OR_RETURN(std::unique_ptr<TableShard> tables, task->options_.new_tables(task->self()));
    server->SetTables(std::move(tables));
  }
  server->FindCheckpoints();  // the chief picks the step every shard restores
  task->shards_[task->self()] = std::move(server);
  return task;
}

ParameterServer* ServerTask::shard(int s) const {
  auto it = shards_.find(s);
  return it == shards_.end() ? nullptr : it->second.get();
}

std::vector<int> ServerTask::held_shards() const {
  std::vector<int> held;
  for (const auto& [s, server] : shards_) held.push_back(s);
  return held;
}

bool ServerTask::shutdown_requested() const {
  if (shutdown_) return true;
  for (const auto& [s, server] : shards_) {
    if (server->shutdown_requested()) return true;
  }
  return false;
}

bool ServerTask::IsHead(int s) const {
  if (!replicated()) return s == self();  // shard s on task s
  return map_.epoch > 0 && map_.head(s) == self() && shards_.count(s) > 0;
}

Message ServerTask::Reply(const Message& request, MessageType type) const {
  return ReplyTo(request, type, Source());
}

Message ServerTask::Error(const Message& request, const Status& why) {
  // Clients that have not heard of a new map yet come by the dozen during a failover.
  return ErrorTo(request, why.message(), why.code(), Source(), "ps-task");
}

ReplySource ServerTask::Source() const {
  ParameterServer* own = shard(self());
  return {self(), map_.epoch, own != nullptr ? own->global_step() : 0};
}

Status ServerTask::Admit(const Message& request, const std::string& identity) const {
  ASSIGN_OR_RETURN(Sender sender, IdentifySender(identity, request, options_.server.cluster));
  return Authorize(sender, request);
}

void ServerTask::Stamp(std::vector<Outgoing>* out) const {
  for (Outgoing& o : *out) {
    if (o.task < 0) {
      o.message.map_epoch = map_.epoch;
      continue;
    }
    o.message.role = "ps";
    o.message.task_index = self();
    if (o.message.incarnation == 0) o.message.incarnation = wire::ProcessIncarnation();
    if (o.message.map_epoch == 0) o.message.map_epoch = map_.epoch;
  }
}

std::vector<ServerTask::Outgoing> ServerTask::Handle(const std::string& peer,
                                                     const Message& request,
                                                     const std::string& identity) {
  std::vector<Outgoing> out = Route(peer, request, identity);
  Stamp(&out);
  return out;
}

std::vector<ServerTask::Outgoing> ServerTask::Route(const std::string& peer, const Message& request,
                                                    const std::string& identity) {
  switch (request.type) {
    case MessageType::kHeartbeat:
    case MessageType::kShutdown:
      return ToEveryShard(peer, request, identity);
    case MessageType::kShardMap:
      // Without replicas the shard's server answers it as it always has (not enabled).
      if (replicated()) return HandleShardMap(peer, request, identity);
      break;
    default:
      break;
  }
  const int s = request.shard == -1 ? self() : request.shard;
  if (s < 0 || s >= num_shards()) {
    ++own_stats_.rejected;
    return {{peer, Error(request, InvalidArgument("shard " + std::to_string(request.shard) +
                                                  " is not one of the cluster's " +
                                                  std::to_string(num_shards()) +
                                                  " shards (or -1, this task's own)"))}};
  }
  const bool from_server = request.role == "ps" && (request.type == MessageType::kReplicate ||
                                                    request.type == MessageType::kReplicaCopy);
  ParameterServer* server = shard(s);
  const std::string epoch = std::to_string(map_.epoch);
  if (!from_server && !IsHead(s)) {
    const int head = replicated() ? (map_.epoch > 0 ? map_.head(s) : -1) : s;
    ++own_stats_.rejected;
    return {{peer,
             Error(request, Aborted("not the head of shard " + std::to_string(s) +
                                    " at map epoch " + epoch + " (head: " +
                                    (head >= 0 ? "task " + std::to_string(head) : "none") + ")"))}};
  }
  if (server == nullptr) {
    ++own_stats_.rejected;
    return {{peer, Error(request, Aborted("holds no replica of shard " + std::to_string(s) +
                                          " at map epoch " + epoch))}};
  }
  return server->Handle(peer, request, identity);
}

std::vector<ServerTask::Outgoing> ServerTask::ToEveryShard(const std::string& peer,
                                                           const Message& request,
                                                           const std::string& identity) {
  if (shards_.empty()) {  // nothing held: the task answers for itself
    if (Status s = Admit(request, identity); !s.ok()) {
      ++own_stats_.refused;
      return {{peer, Error(request, s)}};
    }
    if (request.type == MessageType::kShutdown) {
      shutdown_ = true;
      LOG(INFO) << "ps " << self() << ": shutdown requested by " << request.role << " "
                << request.task_index << " (holding no shard)";
    }
    return {{peer, Reply(request, MessageType::kOk)}};
  }
  // The reply the sender gets is its own shard's (or, not holding it, the first held one's);
  // what the others return besides their reply to this request is sent too.
  const int answering = shards_.count(self()) ? self() : shards_.begin()->first;
  std::vector<Outgoing> out;
  for (auto& [s, server] : shards_) {
    for (Outgoing& o : server->Handle(peer, request, identity)) {
      const bool reply_to_this =
          o.task < 0 && o.peer == peer && o.message.request_id == request.request_id;
      if (reply_to_this && s != answering) continue;
      out.push_back(std::move(o));
    }
  }
  return out;
}

Message ServerTask::MapReply(const Message& request) const {
  Message m = Reply(request, MessageType::kOk);
  // The map exactly as the chief set it, with its proofs (wire/map_proof.h), so that clients can
  // check it; the joiners this task's tails found caught up apart, and the shards this task joins
  // whose copy a stamp has verified, for the chief to promote.
  m.chains = wire::ChainsOf(map_);
  m.map_proofs = map_proofs_;
  for (int s = 0; s < map_.num_shards(); ++s) {
    ParameterServer* server = shard(s);
    if (server == nullptr) continue;
    wire::Chain c;
    c.shard = s;
    for (int t : server->CaughtUpJoiners()) {
      if (Contains(map_.joining[s], t)) c.tasks.push_back(t);
    }
    if (server->CopyVerified()) c.tasks.push_back(self());  // its own word, which the chief needs
    if (!c.tasks.empty()) m.caught_up.push_back(std::move(c));
  }
  return m;
}

std::vector<ServerTask::Outgoing> ServerTask::HandleShardMap(const std::string& peer,
                                                             const Message& request,
                                                             const std::string& identity) {
  if (Status s = Admit(request, identity); !s.ok()) {
    ++own_stats_.refused;
    return {{peer, Error(request, s)}};
  }
  if (request.chains.empty()) return {{peer, MapReply(request)}};  // a get
  Result<replication::ShardMap> map = MapOfRequest(request, num_shards());
  if (!map.ok()) {
    ++own_stats_.rejected;
    return {{peer, Error(request, map.status())}};
  }
  std::vector<Outgoing> out;
  if (map->epoch > map_.epoch) {  // an older or equal epoch is a retry or a zombie's: no change
    Result<std::vector<Outgoing>> adopted = Adopt(std::move(map).value());
    if (!adopted.ok()) return {{peer, Error(request, adopted.status())}};
    out = std::move(adopted).value();
    map_proofs_ = request.map_proofs;
  }
  out.push_back({peer, Reply(request, MessageType::kOk)});  // carries the epoch now held
  return out;
}

Result<std::vector<ServerTask::Outgoing>> ServerTask::Adopt(replication::ShardMap map) {
  // Every new shard's store (and tables) first: a failure changes nothing.
  std::map<int, std::unique_ptr<VariableStore>> stores;
  std::map<int, std::unique_ptr<TableShard>> tables;
  for (int s = 0; s < map.num_shards(); ++s) {
    const bool hold = Contains(map.chains[s], self()) || Contains(map.joining[s], self());
    if (hold && !shards_.count(s)) {
      ASSIGN_OR_RETURN(stores[s], options_.new_store());
      if (options_.new_tables) {
        ASSIGN_OR_RETURN(tables[s], options_.new_tables(s));
      }
    }
  }
  map_ = std::move(map);
  ForgetTasksOutside(map_);
  std::vector<Outgoing> out;
  std::string held;
  for (int s = 0; s < map_.num_shards(); ++s) {
    ParameterServer::ChainView view;
    view.epoch = map_.epoch;
    view.tasks = map_.chains[s];
    view.joining = map_.joining[s];
    view.self = self();
    const bool hold = Contains(view.tasks, self()) || Contains(view.joining, self());
    if (stores.count(s)) {
      ServerOptions o = options_.server;
      o.shard = s;
      shards_[s] = std::make_unique<ParameterServer>(o, std::move(stores[s]));
      if (tables.count(s)) shards_[s]->SetTables(std::move(tables[s]));
      LOG(INFO) << "ps " << self() << ": takes on shard " << s << " (empty, "
                << (Contains(view.joining, self()) ? "joining" : "a member") << ")";
    }
    auto it = shards_.find(s);
    if (it == shards_.end()) continue;
    // A shard being dropped learns it too: it answers what it holds back (kAborted).
    std::vector<Outgoing> sent = it->second->SetChain(view);
    out.insert(out.end(), std::make_move_iterator(sent.begin()),
               std::make_move_iterator(sent.end()));
    if (!hold) {
      LOG(INFO) << "ps " << self() << ": drops shard " << s << " (not in its chain at map epoch "
                << map_.epoch << ")";
      shards_.erase(it);
    } else {
      held += (held.empty() ? "" : ", ") + std::to_string(s);
    }
  }
  LOG(INFO) << "ps " << self() << ": " << map_.Describe() << "; holds shard(s) "
            << (held.empty() ? "none" : held);
  return out;
}

std::vector<ServerTask::Outgoing> ServerTask::HandleServerReply(int from_task,
                                                                const Message& reply) {
  ParameterServer* server = shard(reply.shard);
  if (server == nullptr) {
    VLOG(1) << "ps " << self() << ": a reply from ps " << from_task << " for shard " << reply.shard
            << ", which this task does not hold: dropped";
    return {};
  }
  if (options_.on_server_reply) options_.on_server_reply(reply.shard, from_task, reply);
  std::vector<Outgoing> out = server->HandleServerReply(from_task, reply);
  Stamp(&out);
  return out;
}

}  // namespace ps
}  // namespace pstrain
