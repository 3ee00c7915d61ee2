#include "worker/distributed/request_router.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

namespace pstrain {
namespace worker {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

namespace {
// A shard-map fetch: a round trip to every live server.
constexpr milliseconds kFetchTimeout(1000);
// Between two fetches of an exchange (a server may show a newer epoch before the map reaches
// every one, and a refused request is retried behind a backoff anyway).
constexpr milliseconds kFetchInterval(200);

// One request of an exchange, until its reply comes.
struct Pending {
  int shard = -1;   // -1: a task-level request
  int server = 0;   // the task it was last sent to (-1: parked, its shard has no head)
  Message message;  // with its request id
  Message reply;
  bool done = false;
  bool reinit = false;  // a register this client added to initialise a server again
  // Its place among the caller's requests, which Send's order, `on_reply` and Await's replies go
  // by; -1 for a re-initialisation, which may come between them (added while the caller awaits
  // some of its requests, and sends more after).
  int64_t caller = -1;
};

// What an exchange knows of one server. Requests to a server are only ever sent again as a
// round: all of its unanswered ones, in their first order, so that a pull never overtakes the
// push before it; and never while the chief's re-initialisation of it is unanswered.
struct ServerRound {
  int64_t generation = 0;  // the heartbeat generation the last round was sent in
  bool reinit_pending = false;
  Clock::time_point retry_at = Clock::time_point::max();  // waiting for the chief's reinit
  Clock::time_point heard = Clock::now();  // its last reply to this exchange, or the last round
};

// With replicas, a server that has answered none of an exchange's requests for this long while
// it is up is sent them again: during a failover's map changes a client resends its rounds
// several times, and a reply the server dropped (its queue to this client full) would otherwise
// leave its request waiting for the step's whole timeout. Longer than any step's wait for its
// window; a resent request is answered once (pushes by their sequence, pulls again).
constexpr milliseconds kQuietResend(30000);

// What an exchange knows of the routes (replicas only).
struct RouteState {
  bool fetch = false;  // a server refused a request as not the head: fetch the map
  Clock::time_point fetch_at;
  std::map<int, Clock::time_point> retry_at;      // by shard: refused, sent again then
  std::map<int, Clock::time_point> parked_since;  // by shard: no head to send to
};
}  // namespace

// Defined here, where Pending and ServerRound are.
struct RequestRouter::InFlight {
  std::vector<Pending> pending;     // the caller's requests and reinits, in the order sent
  std::vector<ServerRound> rounds;  // by server
  size_t requested = 0;             // the caller's requests
  RouteState route;
};

RequestRouter::RequestRouter(std::vector<std::unique_ptr<wire::Connection>> servers,
                             const HeartbeatMonitor* heartbeat, ShardRoutes* routes,
                             Options options)
    : servers_(std::move(servers)),
      heartbeat_(heartbeat),
      routes_(routes),
      options_(std::move(options)) {}

RequestRouter::~RequestRouter() = default;

std::string RequestRouter::ServerName(int s) const {
  return "ps " + std::to_string(s) + " (" + options_.hosts[s] + ")";
}

void RequestRouter::MarkFresh(int shard) {
  std::lock_guard<std::mutex> lock(fresh_mu_);
  fresh_.push_back(shard);
}

std::shared_ptr<RequestRouter::InFlight> RequestRouter::Start() {
  auto f = std::make_shared<InFlight>();
  f->rounds.resize(servers_.size());
  for (size_t s = 0; s < servers_.size(); ++s) {
    f->rounds[s].generation = HealthOf(static_cast<int>(s)).generation;
  }
  return f;
}

Status RequestRouter::Send(InFlight* f, int shard, Message message) {
  return SendTo(f, shard, routes_->Head(shard), std::move(message));
}

Status RequestRouter::SendTo(InFlight* f, int shard, int task, Message message) {
  Pending p;
  p.shard = shard;
  p.server = task;
  p.message = std::move(message);
  if (shard >= 0) p.message.shard = routes_->ShardField(shard);
  p.message.request_id = next_id_++;
  p.caller = static_cast<int64_t>(f->requested++);
  f->pending.push_back(std::move(p));
  if (task < 0) {  // Await sends it once a map names a head
    f->route.parked_since.emplace(shard, Clock::now());
    return Status::OK();
  }
  return servers_[task]->Send(f->pending.back().message).WithContext(ServerName(task));
}

Result<std::vector<Message>> RequestRouter::Exchange(
    const std::vector<std::pair<int, Message>>& out, milliseconds timeout, bool to_tasks) {
  std::shared_ptr<InFlight> f = Start();
  for (const auto& [where, message] : out) {
    RETURN_IF_ERROR(to_tasks ? SendTo(f.get(), -1, where, message) : Send(f.get(), where, message));
  }
  return Await(f.get(), timeout);
}

HeartbeatMonitor::Health RequestRouter::HealthOf(int s) const {
  return heartbeat_ ? heartbeat_->Of(s) : HeartbeatMonitor::Health{};
}

Status RequestRouter::SendPending(const InFlight& f, size_t k) {
  const Pending& p = f.pending[k];
  return servers_[p.server]->Send(p.message).WithContext(ServerName(p.server));
}

// Server `s`'s unanswered requests, again, in their first order.
Status RequestRouter::SendRound(InFlight* f, int s) {
  f->rounds[s].generation = HealthOf(s).generation;
  f->rounds[s].retry_at = Clock::time_point::max();
  f->rounds[s].heard = Clock::now();
  for (size_t k = 0; k < f->pending.size(); ++k) {
    const Pending& p = f->pending[k];
    if (p.server == s && !p.done && !p.reinit) RETURN_IF_ERROR(SendPending(*f, k));
  }
  return Status::OK();
}

// The chief's register `message`, which gives shard `shard`, at task `server`, its values again.
Status RequestRouter::Reinit(InFlight* f, int shard, int server, Message message) {
  Pending p;
  p.shard = shard;
  p.server = server;
  p.message = std::move(message);
  p.message.shard = routes_->ShardField(shard);
  p.message.request_id = next_id_++;
  p.reinit = true;
  f->pending.push_back(std::move(p));
  f->rounds[server].reinit_pending = true;
  return SendPending(*f, f->pending.size() - 1);
}

// Shard `s`'s unanswered requests go to its head now, in their first order (a chief's
// re-initialisation meant for the old head is dropped: the new one says if it needs one).
Status RequestRouter::SendShard(InFlight* f, int s) {
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
Status RequestRouter::FollowRoutes(InFlight* f, milliseconds timeout, TimePoint* deadline,
                                   bool* any_down) {
  RouteState& route = f->route;
  auto now = Clock::now();
  if (heartbeat_) routes_->Observe(heartbeat_->highest_map_epoch());
  if ((route.fetch || routes_->Behind()) && now >= route.fetch_at) {
    Result<bool> fetched = routes_->Fetch([&](int t) { return HealthOf(t).up; }, kFetchTimeout);
    if (!fetched.ok()) {
      LOG_EVERY_N(WARNING, 10) << options_.who << ": " << fetched.status().ToString();
    }
    route.fetch = false;
    now = Clock::now();
    route.fetch_at = now + kFetchInterval;
  }
  if (options_.reinit) RETURN_IF_ERROR(InitializeFreshShards(f));
  std::set<int> moved, again;
  for (const Pending& p : f->pending) {
    if (!p.done && p.shard >= 0 && p.server != routes_->Head(p.shard)) moved.insert(p.shard);
  }
  for (const auto& [s, at] : route.retry_at) {
    if (now >= at && !moved.count(s)) again.insert(s);
  }
  for (int s : moved) {
    LOG(INFO) << options_.who << ": sending the unanswered requests of shard " << s << " to "
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
Status RequestRouter::InitializeFreshShards(InFlight* f) {
  std::vector<int> fresh;
  {
    std::lock_guard<std::mutex> lock(fresh_mu_);
    fresh.swap(fresh_);
  }
  for (int s : fresh) {
    const int head = routes_->Head(s);
    if (head < 0 || f->rounds[head].reinit_pending) continue;
    Message values = options_.reinit(s);
    LOG(WARNING) << options_.who << ": shard " << s << " starts afresh on " << ServerName(head)
                 << "; initialising it from this chief's values at step " << values.step;
    RETURN_IF_ERROR(Reinit(f, s, head, std::move(values)));
  }
  return Status::OK();
}

// Each server with requests waiting: given up on once down for too long; sent its round again
// when it came back or restarted (it may never have seen them), or when its turn came.
Status RequestRouter::ResendToServers(InFlight* f, milliseconds timeout, TimePoint* deadline,
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
    const bool quiet = routes_->replicated() && h.up && now - f->rounds[s].heard > kQuietResend;
    if (quiet) {
      LOG(WARNING) << options_.who << ": no reply from " << ServerName(s) << " for "
                   << kQuietResend.count() / 1000
                   << " s: sending its unanswered requests again (a reply may have been dropped)";
    }
    if (quiet || h.generation != f->rounds[s].generation || now >= f->rounds[s].retry_at) {
      if (h.generation != f->rounds[s].generation) {
        LOG(INFO) << options_.who << ": sending its unanswered requests to " << ServerName(s)
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
Status RequestRouter::HandleRefusal(InFlight* f, size_t k, int server, const Status& status,
                                    milliseconds* backoff) {
  Pending& p = f->pending[k];
  ServerRound& round = f->rounds[server];
  // Not the head (the map moved on, or the server has none yet): fetch the map; the request
  // goes to the new head, or to the same one again after a backoff.
  if (routes_->replicated() && status.code() == StatusCode::kAborted && p.shard >= 0) {
    VLOG(1) << options_.who << ": " << status.ToString();
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
  // roll one shard back behind the others) and says so with a code of its own, kUninitialized:
  // the chief gives it its current values again, and the server its optimizer slots from its
  // newest checkpoint; everyone else waits for that. Any other refusal (FailedPrecondition
  // included) fails the exchange. (Copies of a round sent earlier may still bring this error
  // after the fact; they change nothing.)
  if (status.code() != StatusCode::kUninitialized || p.reinit ||
      p.message.type == MessageType::kRegister) {
    return status;
  }
  if (options_.reinit) {
    if (round.reinit_pending) return Status::OK();
    const int shard = p.shard >= 0 ? p.shard : server;
    Message values = options_.reinit(shard);
    LOG(WARNING) << options_.who << ": " << ServerName(server)
                 << " has lost its variables (it restarted); initialising it again from "
                 << "this chief's values at step " << values.step;
    return Reinit(f, shard, server, std::move(values));
  }
  if (round.retry_at == Clock::time_point::max()) {
    LOG_EVERY_N(INFO, 20) << options_.who << ": waiting for the chief to initialise "
                          << ServerName(server) << " again";
    round.retry_at = Clock::now() + *backoff;
    *backoff = std::min(*backoff * 2, milliseconds(2000));
  }
  return Status::OK();
}

// A reply from `server`: its request answered, refused (HandleRefusal), or none of this
// exchange's (a late or duplicate reply to a request answered before).
Status RequestRouter::TakeReply(InFlight* f, int server, Message reply,
                                const std::function<void(size_t, const Message&)>& on_reply,
                                milliseconds* backoff) {
  std::vector<Pending>& pending = f->pending;
  size_t k = pending.size();
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!pending[i].done && pending[i].server == server &&
        pending[i].message.request_id == reply.request_id) {
      k = i;
    }
  }
  if (k == pending.size()) {
    Stash(server, std::move(reply));  // another exchange's, or a late duplicate
    return Status::OK();
  }
  f->rounds[server].heard = Clock::now();
  const Status status = wire::StatusOfReply(reply);
  if (!status.ok()) return HandleRefusal(f, k, server, status, backoff);
  pending[k].done = true;
  pending[k].reply = std::move(reply);
  if (on_reply && pending[k].caller >= 0) on_reply(pending[k].caller, pending[k].reply);
  if (pending[k].reinit) {
    LOG(WARNING) << options_.who << ": " << ServerName(server) << " initialised again";
    f->rounds[server].reinit_pending = false;
    RETURN_IF_ERROR(SendRound(f, server));
  }
  return Status::OK();
}

// The loop of an exchange: keep the routes and the rounds current, wait on the first unanswered
// request that is wanted (the chief's re-initialisations always are) and has somewhere to go,
// and take each reply, wanted or not, as it comes.
Status RequestRouter::AwaitUntil(InFlight* f, milliseconds timeout,
                                 const std::function<void(size_t, const Message&)>& on_reply,
                                 const std::function<bool(size_t)>& wanted) {
  std::vector<Pending>& pending = f->pending;
  const auto waits_for = [&](size_t i) {
    return !pending[i].done && (pending[i].caller < 0 || wanted(pending[i].caller));
  };
  auto deadline = Clock::now() + timeout;
  milliseconds backoff(100);
  while (true) {
    size_t next = pending.size();
    for (size_t i = 0; i < pending.size() && next == pending.size(); ++i) {
      if (waits_for(i)) next = i;
    }
    if (next == pending.size()) return Status::OK();
    bool any_down = false;
    if (routes_->replicated()) RETURN_IF_ERROR(FollowRoutes(f, timeout, &deadline, &any_down));
    RETURN_IF_ERROR(ResendToServers(f, timeout, &deadline, &any_down));
    for (size_t i = next; i < pending.size() && pending[next].server < 0; ++i) {
      if (waits_for(i) && pending[i].server >= 0) next = i;
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
    RETURN_IF_ERROR(TakeStashed(f, on_reply, &backoff));
    if (!waits_for(next)) continue;  // a stashed reply answered what this loop waited for
    RETURN_IF_ERROR(TakeWaitingReplies(f, server, on_reply, &backoff));
    Result<Message> reply = servers_[server]->Receive(milliseconds(250));
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kUnavailable) continue;  // 250 ms went by
      return reply.status().WithContext(ServerName(server));
    }
    if (routes_->replicated()) routes_->Observe(reply->map_epoch);
    RETURN_IF_ERROR(TakeReply(f, server, std::move(reply).value(), on_reply, &backoff));
  }
}

void RequestRouter::Stash(int server, Message reply) {
  stashed_.push_back({server, std::move(reply)});
  if (stashed_.size() > kMaxStashed) stashed_.pop_front();  // the oldest: a finished exchange's
}

Status RequestRouter::TakeStashed(InFlight* f,
                                  const std::function<void(size_t, const Message&)>& on_reply,
                                  milliseconds* backoff) {
  for (auto it = stashed_.begin(); it != stashed_.end();) {
    const bool ours = std::any_of(f->pending.begin(), f->pending.end(), [&](const Pending& p) {
      return !p.done && p.server == it->first && p.message.request_id == it->second.request_id;
    });
    if (!ours) {
      ++it;
      continue;
    }
    auto [server, reply] = std::move(*it);
    it = stashed_.erase(it);
    RETURN_IF_ERROR(TakeReply(f, server, std::move(reply), on_reply, backoff));
  }
  return Status::OK();
}

// The replies already here from every server but `waited_on` that has requests in flight: left
// unread while the loop waits on one server, a server with many requests of this client in
// flight (a click model's row requests, one per table and shard) would find this client's queue
// full and drop its replies.
Status RequestRouter::TakeWaitingReplies(
    InFlight* f, int waited_on, const std::function<void(size_t, const Message&)>& on_reply,
    milliseconds* backoff) {
  for (size_t i = 0; i < servers_.size(); ++i) {
    const int s = static_cast<int>(i);
    bool waiting = false;
    for (const Pending& p : f->pending) waiting |= p.server == s && !p.done;
    if (s == waited_on || !waiting) continue;
    while (true) {
      Result<Message> reply = servers_[s]->Receive(milliseconds(0));
      if (!reply.ok()) {
        if (reply.status().code() == StatusCode::kUnavailable) break;  // none waiting
        return reply.status().WithContext(ServerName(s));
      }
      if (routes_->replicated()) routes_->Observe(reply->map_epoch);
      RETURN_IF_ERROR(TakeReply(f, s, std::move(reply).value(), on_reply, backoff));
    }
  }
  return Status::OK();
}

Status RequestRouter::AwaitSome(InFlight* f, milliseconds timeout,
                                const std::vector<size_t>& wanted,
                                const std::function<void(size_t, const Message&)>& on_reply) {
  return AwaitUntil(f, timeout, on_reply, [&](size_t i) {
    return std::find(wanted.begin(), wanted.end(), i) != wanted.end();
  });
}

Result<std::vector<Message>> RequestRouter::Await(
    InFlight* f, milliseconds timeout,
    const std::function<void(size_t, const Message&)>& on_reply) {
  RETURN_IF_ERROR(AwaitUntil(f, timeout, on_reply, [](size_t) { return true; }));
  std::vector<Message> replies(f->requested);
  for (Pending& p : f->pending) {
    if (p.caller >= 0) replies[p.caller] = std::move(p.reply);
  }
  return replies;
}

}  // namespace worker
}  // namespace pstrain
