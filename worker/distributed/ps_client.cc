#include "worker/distributed/ps_client.h"

#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "common/checkpoint/cluster_checkpoint.h"
#include "common/wire/same_host.h"
#include "worker/distributed/shard_master.h"
#include "worker/distributed/tf_checkpoint_writer.h"

namespace pstrain {
namespace worker {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

namespace {
// Long enough for a sync step that waits on the slowest worker.
constexpr milliseconds kStepTimeout(300000);
constexpr milliseconds kShortTimeout(30000);
// A shard-map fetch: a round trip to every live server.
constexpr milliseconds kFetchTimeout(1000);
// Between two fetches of an exchange (a server may show a newer epoch before the map reaches
// every one, and a refused request is retried behind a backoff anyway).
constexpr milliseconds kFetchInterval(200);
// Committed steps the record remembers: more than a shard keeps by default (--max_to_keep 5); a
// step whose files are gone is simply not restorable.
constexpr int kCommitsKept = 20;

// Rows [begin, end) of `t` as a tensor sharing its buffer.
Tensor Rows(const Tensor& t, const replication::Partition& p) {
  if (p.row_begin == 0 && p.row_end == (t.shape().rank() ? t.dim(0) : 1)) return t;
  const int64_t row = t.size() / t.dim(0);
  Tensor keep = t;
  return Tensor::Wrap(p.shape, const_cast<float*>(t.data()) + p.row_begin * row, [keep] {});
}
}  // namespace

Result<std::unique_ptr<PsClient>> PsClient::Connect(const std::vector<std::string>& ps_hosts,
                                                    const std::string& role, int task_index,
                                                    const std::vector<Variable*>& variables,
                                                    int64_t partition_bytes,
                                                    const wire::ClusterKeys& curve, int replicas) {
  if (replicas != 0) {
    // The same checks, by name, as every other role's.
    RETURN_IF_ERROR(replication::PlaceReplicas(ps_hosts, replicas).status());
  }
  auto c = std::unique_ptr<PsClient>(new PsClient());
  c->role_ = role;
  c->task_index_ = task_index;
  c->variables_ = variables;
  std::vector<replication::VariableSpec> specs;
  for (Variable* v : variables) specs.push_back({v->name, v->value.shape()});
  ASSIGN_OR_RETURN(c->sharding_, replication::Sharding::Compute(
                                     specs, static_cast<int>(ps_hosts.size()), partition_bytes));
  // Every connection to server s (heartbeats too) trusts ps task s's public key with --curve_keys;
  // one on this host is reached over its same-host socket (common/wire/same_host.h).
  const auto connect = [ps_hosts, curve](int s) -> Result<std::unique_ptr<wire::Connection>> {
    ASSIGN_OR_RETURN(wire::ServerRoute route, wire::RouteToServer(curve, s, ps_hosts[s]));
    return wire::Connection::Connect(route.endpoint, {}, route.security);
  };
  for (size_t s = 0; s < ps_hosts.size(); ++s) {
    ASSIGN_OR_RETURN(auto conn, connect(static_cast<int>(s)));
    c->servers_.push_back(std::move(conn));
  }
  c->hosts_ = ps_hosts;
  c->curve_ = curve;
  c->push_sequence_.assign(ps_hosts.size(), 0);
  c->routes_ = std::make_unique<ShardRoutes>(static_cast<int>(ps_hosts.size()), replicas, role,
                                             task_index, connect, MapCheckOf(curve));
  c->heartbeat_ = std::make_unique<HeartbeatMonitor>(ps_hosts, role, task_index, connect);
  RETURN_IF_ERROR(c->heartbeat_->Start());
  return c;
}

Message PsClient::Request(MessageType type) const {
  Message m;
  m.type = type;
  m.role = role_;
  m.task_index = task_index_;
  m.incarnation = wire::ProcessIncarnation();
  return m;
}

namespace {
// One request of an exchange, until its reply comes.
struct Pending {
  int shard = -1;   // -1: a task-level request
  int server = 0;   // the task it was last sent to (-1: parked, its shard has no head)
  Message message;  // with its request id
  Message reply;
  bool done = false;
  bool reinit = false;  // a register this client added to initialise a server again
};

// What an exchange knows of one server. Requests to a server are only ever sent again as a
// round: all of its unanswered ones, in their first order, so that a pull never overtakes the
// push before it; and never while the chief's re-initialisation of it is unanswered.
struct ServerRound {
  int64_t generation = 0;  // the heartbeat generation the last round was sent in
  bool reinit_pending = false;
  Clock::time_point retry_at = Clock::time_point::max();  // waiting for the chief's reinit
};

// What an exchange knows of the routes (replicas only).
struct RouteState {
  bool fetch = false;  // a server refused a request as not the head: fetch the map
  Clock::time_point fetch_at;
  std::map<int, Clock::time_point> retry_at;      // by shard: refused, sent again then
  std::map<int, Clock::time_point> parked_since;  // by shard: no head to send to
};
}  // namespace

std::string PsClient::ServerName(int s) const {
  return "ps " + std::to_string(s) + " (" + hosts_[s] + ")";
}

// Defined here, where Pending and ServerRound are.
struct PsClient::InFlight {
  std::vector<Pending> pending;     // the caller's requests in the order sent, then reinits
  std::vector<ServerRound> rounds;  // by server
  size_t requested = 0;             // the caller's requests
  RouteState route;
};

PsClient::PsClient() = default;
PsClient::~PsClient() {
  for (size_t s = 0; s < acknowledged_steps_.size(); ++s) {
    LOG(INFO) << Who() << ": shard " << s << ": " << acknowledged_steps_[s]
              << " pushes acknowledged";
  }
}

void PsClient::NoteStepAcknowledged(int64_t global_step) {
  if (global_step < last_step_) {
    LOG(ERROR) << Who() << ": the global step went back from " << last_step_ << " to "
               << global_step << " (an acknowledged update was lost)";
  }
  last_step_ = global_step;
  acknowledged_steps_.resize(servers_.size(), 0);
  for (size_t s = 0; s < servers_.size(); ++s) {
    if (!sharding_.OnTask(static_cast<int>(s)).empty()) ++acknowledged_steps_[s];
  }
}

std::shared_ptr<PsClient::InFlight> PsClient::Start() {
  auto f = std::make_shared<InFlight>();
  f->rounds.resize(servers_.size());
  for (size_t s = 0; s < servers_.size(); ++s) {
    f->rounds[s].generation = heartbeat_ ? heartbeat_->Of(static_cast<int>(s)).generation : 0;
  }
  return f;
}

Status PsClient::Send(InFlight* f, int shard, Message message) {
  return SendTo(f, shard, routes_->Head(shard), std::move(message));
}

Status PsClient::SendTo(InFlight* f, int shard, int task, Message message) {
  Pending p;
  p.shard = shard;
  p.server = task;
  p.message = std::move(message);
  if (shard >= 0) p.message.shard = routes_->ShardField(shard);
  p.message.request_id = next_id_++;
  f->pending.push_back(std::move(p));
  ++f->requested;
  if (task < 0) {  // Await sends it once a map names a head
    f->route.parked_since.emplace(shard, Clock::now());
    return Status::OK();
  }
  return servers_[task]->Send(f->pending.back().message).WithContext(ServerName(task));
}

Result<std::vector<Message>> PsClient::Exchange(const std::vector<std::pair<int, Message>>& out,
                                                milliseconds timeout, bool to_tasks) {
  std::shared_ptr<InFlight> f = Start();
  for (const auto& [where, message] : out) {
    RETURN_IF_ERROR(to_tasks ? SendTo(f.get(), -1, where, message) : Send(f.get(), where, message));
  }
  return Await(f.get(), timeout);
}

HeartbeatMonitor::Health PsClient::HealthOf(int s) const {
  return heartbeat_ ? heartbeat_->Of(s) : HeartbeatMonitor::Health{};
}

Status PsClient::SendPending(const InFlight& f, size_t k) {
  const Pending& p = f.pending[k];
  return servers_[p.server]->Send(p.message).WithContext(ServerName(p.server));
}

// Server `s`'s unanswered requests, again, in their first order.
Status PsClient::SendRound(InFlight* f, int s) {
  f->rounds[s].generation = HealthOf(s).generation;
  f->rounds[s].retry_at = Clock::time_point::max();
  for (size_t k = 0; k < f->pending.size(); ++k) {
    const Pending& p = f->pending[k];
    if (p.server == s && !p.done && !p.reinit) RETURN_IF_ERROR(SendPending(*f, k));
  }
  return Status::OK();
}

// A chief's register that gives shard `shard`, at task `server`, this chief's values again.
Status PsClient::Reinit(InFlight* f, int shard, int server) {
  Pending p;
  p.shard = shard;
  p.server = server;
  p.message = InitMessage(shard, last_step_);
  p.message.shard = routes_->ShardField(shard);
  p.message.request_id = next_id_++;
  p.reinit = true;
  f->pending.push_back(std::move(p));
  f->rounds[server].reinit_pending = true;
  return SendPending(*f, f->pending.size() - 1);
}

// Shard `s`'s unanswered requests go to its head now, in their first order (a chief's
// re-initialisation meant for the old head is dropped: the new one says if it needs one).
Status PsClient::SendShard(InFlight* f, int s) {
  const int head = routes_->Head(s);
  f->route.retry_at.erase(s);
  if (head < 0) {
    f->route.parked_since.emplace(s, Clock::now());
  } else {
    f->route.parked_since.erase(s);
  }
  for (size_t k = 0; k < f->pending.size(); ++k) {
    Pending& p = f->pending[k];
    if (p.shard != s || p.done) continue;
    if (p.reinit) {
      if (p.server != head) {
        p.done = true;
        if (p.server >= 0) f->rounds[p.server].reinit_pending = false;
      }
      continue;
    }
    p.server = head;
    if (head >= 0 && !f->rounds[head].reinit_pending) RETURN_IF_ERROR(SendPending(*f, k));
  }
  return Status::OK();
}

// Replicas only: a newer map seen on any reply or heartbeat, or a refusal, fetches the map;
// then every shard whose head moved, or whose refused request waited its turn, goes to its head.
Status PsClient::FollowRoutes(InFlight* f, milliseconds timeout, Clock::time_point* deadline,
                              bool* any_down) {
  RouteState& route = f->route;
  auto now = Clock::now();
  if (heartbeat_) routes_->Observe(heartbeat_->highest_map_epoch());
  if ((route.fetch || routes_->Behind()) && now >= route.fetch_at) {
    Result<bool> fetched = routes_->Fetch([&](int t) { return HealthOf(t).up; }, kFetchTimeout);
    if (!fetched.ok()) {
      LOG_EVERY_N(WARNING, 10) << Who() << ": " << fetched.status().ToString();
    }
    route.fetch = false;
    now = Clock::now();
    route.fetch_at = now + kFetchInterval;
  }
  if (role_ == "chief") RETURN_IF_ERROR(InitializeFreshShards(f));
  std::set<int> moved, again;
  for (const Pending& p : f->pending) {
    if (!p.done && p.shard >= 0 && p.server != routes_->Head(p.shard)) moved.insert(p.shard);
  }
  for (const auto& [s, at] : route.retry_at) {
    if (now >= at && !moved.count(s)) again.insert(s);
  }
  for (int s : moved) {
    LOG(INFO) << Who() << ": sending the unanswered requests of shard " << s << " to "
              << (routes_->Head(s) < 0 ? std::string("no task yet (it has no live replica)")
                                       : ServerName(routes_->Head(s)))
              << " (map epoch " << routes_->epoch() << ")";
    RETURN_IF_ERROR(SendShard(f, s));
    *deadline = std::max(*deadline, now + timeout);
  }
  // The same head again, after its refusal: no new time for the exchange (a head that never
  // takes them fails it, as one that never answers does).
  for (int s : again) RETURN_IF_ERROR(SendShard(f, s));
  for (const auto& [s, since] : route.parked_since) {
    *any_down = true;
    if (now - since > unavailable_timeout_) {
      return Unavailable("shard " + std::to_string(s) + " has had no live replica for " +
                         std::to_string(unavailable_timeout_.count()) +
                         " s (--ps_unavailable_timeout_secs); giving up on the exchange");
    }
  }
  return Status::OK();
}

// The chief: shards the chain master restarted empty get this chief's values.
Status PsClient::InitializeFreshShards(InFlight* f) {
  std::vector<int> fresh;
  {
    std::lock_guard<std::mutex> lock(fresh_mu_);
    fresh.swap(fresh_);
  }
  for (int s : fresh) {
    const int head = routes_->Head(s);
    if (head < 0 || f->rounds[head].reinit_pending) continue;
    LOG(WARNING) << Who() << ": shard " << s << " starts afresh on " << ServerName(head)
                 << "; initialising it from this chief's values at step " << last_step_;
    RETURN_IF_ERROR(Reinit(f, s, head));
  }
  return Status::OK();
}

// Each server with requests waiting: given up on once down for too long; sent its round again
// when it came back or restarted (it may never have seen them), or when its turn came.
Status PsClient::ResendToServers(InFlight* f, milliseconds timeout, Clock::time_point* deadline,
                                 bool* any_down) {
  const auto now = Clock::now();
  for (size_t i = 0; i < servers_.size(); ++i) {
    const int s = static_cast<int>(i);
    bool waiting = false;
    for (const Pending& p : f->pending) waiting |= p.server == s && !p.done;
    if (!waiting) continue;
    const HeartbeatMonitor::Health h = HealthOf(s);
    if (!h.up) {
      *any_down = true;
      if (now - h.down_since > unavailable_timeout_) {
        return Unavailable(ServerName(s) + " has not answered for " +
                           std::to_string(unavailable_timeout_.count()) +
                           " s (--ps_unavailable_timeout_secs); giving up on the exchange");
      }
    }
    if (f->rounds[s].reinit_pending) continue;
    if (h.generation != f->rounds[s].generation || now >= f->rounds[s].retry_at) {
      if (h.generation != f->rounds[s].generation) {
        LOG(INFO) << Who() << ": sending its unanswered requests to " << ServerName(s)
                  << " again (it came back or restarted)";
      }
      RETURN_IF_ERROR(SendRound(f, s));
      *deadline = std::max(*deadline, now + timeout);
    }
  }
  return Status::OK();
}

// An error reply to request `k` from `server`: OK when the exchange goes on (the request is
// sent again, to a new head or after the chief's re-initialisation), else the error.
Status PsClient::HandleRefusal(InFlight* f, size_t k, int server, const Status& status,
                               milliseconds* backoff) {
  Pending& p = f->pending[k];
  ServerRound& round = f->rounds[server];
  // Not the head (the map moved on, or the server has none yet): fetch the map; the request
  // goes to the new head, or to the same one again after a backoff.
  if (routes_->replicated() && status.code() == StatusCode::kAborted && p.shard >= 0) {
    VLOG(1) << Who() << ": " << status.ToString();
    f->route.fetch = true;
    if (p.reinit) {  // the new head says again if it needs one
      p.done = true;
      round.reinit_pending = false;
    }
    if (!f->route.retry_at.count(p.shard)) {
      f->route.retry_at[p.shard] = Clock::now() + *backoff;
      *backoff = std::min(*backoff * 2, milliseconds(2000));
    }
    return Status::OK();
  }
  // A server that restarted has no variables (servers never restore on their own, which would
  // roll one shard back behind the others): the chief gives it its current values again, and
  // the server its optimizer slots from its newest checkpoint; everyone else waits for that.
  // (Copies of a round sent earlier may still bring this error after the fact; they change
  // nothing.)
  if (status.code() != StatusCode::kFailedPrecondition || p.reinit ||
      p.message.type == MessageType::kRegister) {
    return status;
  }
  if (role_ == "chief") {
    if (round.reinit_pending) return Status::OK();
    LOG(WARNING) << Who() << ": " << ServerName(server)
                 << " has lost its variables (it restarted); initialising it again from "
                 << "this chief's values at step " << last_step_;
    return Reinit(f, p.shard >= 0 ? p.shard : server, server);
  }
  if (round.retry_at == Clock::time_point::max()) {
    LOG_EVERY_N(INFO, 20) << Who() << ": waiting for the chief to initialise " << ServerName(server)
                          << " again";
    round.retry_at = Clock::now() + *backoff;
    *backoff = std::min(*backoff * 2, milliseconds(2000));
  }
  return Status::OK();
}

// The loop of an exchange: keep the routes and the rounds current, wait on the first unanswered
// request that has somewhere to go, and take each reply.
Result<std::vector<Message>> PsClient::Await(
    InFlight* f, milliseconds timeout,
    const std::function<void(size_t, const Message&)>& on_reply) {
  std::vector<Pending>& pending = f->pending;
  auto deadline = Clock::now() + timeout;
  milliseconds backoff(100);
  while (true) {
    size_t next = pending.size();
    for (size_t i = 0; i < pending.size() && next == pending.size(); ++i) {
      if (!pending[i].done) next = i;
    }
    if (next == pending.size()) break;
    bool any_down = false;
    if (routes_->replicated()) RETURN_IF_ERROR(FollowRoutes(f, timeout, &deadline, &any_down));
    RETURN_IF_ERROR(ResendToServers(f, timeout, &deadline, &any_down));
    for (size_t i = next; i < pending.size() && pending[next].server < 0; ++i) {
      if (!pending[i].done && pending[i].server >= 0) next = i;
    }
    if (!any_down && Clock::now() > deadline) {
      return Unavailable("no reply from " + ServerName(pending[next].server) + " within " +
                         std::to_string(timeout.count()) + " ms");
    }
    const int server = pending[next].server;
    if (server < 0) {  // every one waits for a map naming a head
      f->route.fetch = true;
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    Result<Message> reply = servers_[server]->Receive(milliseconds(250));
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kUnavailable) continue;  // a slice went by
      return reply.status().WithContext(ServerName(server));
    }
    if (routes_->replicated()) routes_->Observe(reply->map_epoch);
    size_t k = pending.size();
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!pending[i].done && pending[i].server == server &&
          pending[i].message.request_id == reply->request_id) {
        k = i;
      }
    }
    if (k == pending.size()) continue;  // a late or duplicate reply to a request answered before
    const Status status = wire::StatusOfReply(*reply);
    if (!status.ok()) {
      RETURN_IF_ERROR(HandleRefusal(f, k, server, status, &backoff));
      continue;
    }
    pending[k].done = true;
    pending[k].reply = std::move(reply).value();
    if (on_reply && k < f->requested) on_reply(k, pending[k].reply);
    if (pending[k].reinit) {
      LOG(WARNING) << Who() << ": " << ServerName(server) << " initialised again";
      f->rounds[server].reinit_pending = false;
      RETURN_IF_ERROR(SendRound(f, server));
    }
  }
  std::vector<Message> replies;
  for (size_t i = 0; i < f->requested; ++i) replies.push_back(std::move(pending[i].reply));
  return replies;
}

Message PsClient::InitMessage(int s, int64_t step) const {
  Message m = Request(MessageType::kRegister);
  m.step = step;
  for (const replication::Partition& p : sharding_.OnTask(s)) {
    for (Variable* v : variables_) {
      if (v->name == p.variable) m.tensors.push_back({p.key, Rows(v->value, p)});
    }
  }
  return m;
}

Status PsClient::CopyIn(const std::vector<Message>& replies) {
  std::map<std::string, std::pair<const Tensor*, int>> received;  // and the answering task
  for (const Message& r : replies) {
    for (const auto& t : r.tensors) received[t.name] = {&t.tensor, r.task_index};
  }
  for (const replication::Partition& p : sharding_.partitions()) {
    auto it = received.find(p.key);
    if (it == received.end()) continue;
    const auto& [got, task] = it->second;
    // Checked before any copy: a server that holds another partitioning (a checkpoint written
    // with other --partition_bytes, --replicas or servers) or a hostile one must not make this
    // worker read past the tensor it sent.
    if (got->shape() != p.shape) {
      return FailedPrecondition(
          "ps " + std::to_string(task) + " answered a pull of '" + p.key + "' with shape " +
          got->shape().ToString() + "; this worker's partition is " + p.shape.ToString() +
          ": the servers hold the variables split another way (a checkpoint in --train_dir from "
          "a run with other --partition_bytes, --replicas or --ps_hosts? --replicas makes the "
          "default 1 MiB, else 8 MiB)");
    }
  }
  for (const replication::Partition& p : sharding_.partitions()) {
    auto it = received.find(p.key);
    if (it == received.end()) continue;
    for (Variable* v : variables_) {
      if (v->name != p.variable) continue;
      Tensor dst = Rows(v->value, p);
      std::memcpy(dst.data(), it->second.first->data(), dst.bytes());
    }
  }
  return Status::OK();
}

Result<int64_t> PsClient::Pull() {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kPull));
  }
  ASSIGN_OR_RETURN(std::vector<Message> replies, Exchange(out, kShortTimeout));
  RETURN_IF_ERROR(CopyIn(replies));
  last_step_ = replies[0].step;
  return replies[0].step;
}

Message PsClient::PushOf(int s, const std::vector<replication::Partition>& partitions,
                         int64_t step) {
  Message push = Request(MessageType::kPush);
  push.step = step;
  push.sequence = ++push_sequence_[s];
  if (s == 0) push.uses = std::exchange(data_uses_, {});  // elastic data: one part carries them
  for (const replication::Partition& p : partitions) {
    for (Variable* v : variables_) {
      if (v->name != p.variable) continue;
      if (v->trainable) {
        push.tensors.push_back({p.key, Rows(v->grad, p)});
      } else {
        push.tensors.push_back({p.key, Rows(v->value, p)});
        push.assigns.push_back(p.key);  // a value to assign, not a gradient
      }
    }
  }
  return push;
}

Result<PushPullResult> PsClient::PushAndPull(int64_t step) {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    const int server = static_cast<int>(s);
    out.emplace_back(server, PushOf(server, sharding_.OnTask(server), step));
  }
  for (size_t s = 0; s < servers_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kPull));
  }
  ASSIGN_OR_RETURN(std::vector<Message> replies, Exchange(out, kStepTimeout));
  PushPullResult result;
  for (size_t s = 0; s < servers_.size(); ++s) result.dropped |= replies[s].value < 0;
  std::vector<Message> pulls(replies.begin() + servers_.size(), replies.end());
  RETURN_IF_ERROR(CopyIn(pulls));
  result.global_step = pulls[0].step;
  NoteStepAcknowledged(result.global_step);
  return result;
}

Status PsClient::Barrier(const std::string& name, int participants) {
  Message m = Request(MessageType::kBarrier);
  m.text = name;
  m.value = participants;
  return Exchange({{0, m}}, milliseconds(3600 * 1000)).status();
}

Status PsClient::Checkpoint(int64_t step, const std::string& train_dir) {
  // A step saved again is not committed until every shard has written it again.
  if (!train_dir.empty()) RETURN_IF_ERROR(UncommitStepsAfter(train_dir, step - 1));
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    Message m = Request(MessageType::kCheckpoint);
    m.step = step;
    m.text = train_dir;
    out.emplace_back(static_cast<int>(s), m);
  }
  // Servers answer once their file is durable; they go on serving while they write it.
  RETURN_IF_ERROR(Exchange(out, kStepTimeout).status());
  if (train_dir.empty()) return Status::OK();
  RETURN_IF_ERROR(CommitStep(train_dir, step, kCommitsKept));
  LOG(INFO) << Who() << ": committed the checkpoint of step " << step << " (" << servers_.size()
            << " shards) in " << CommitRecordPath(train_dir);
  AfterCheckpointCommitted(train_dir, step);  // --tf_checkpoints
  return Status::OK();
}

Status PsClient::Shutdown() {
  std::vector<std::pair<int, Message>> out;
  for (size_t s = 0; s < servers_.size(); ++s) {
    out.emplace_back(static_cast<int>(s), Request(MessageType::kShutdown));
  }
  if (master_) master_->Stop();  // the servers leave: no map to keep
  return Exchange(out, kShortTimeout, /*to_tasks=*/true).status();
}

}  // namespace worker
}  // namespace pstrain
