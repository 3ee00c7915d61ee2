// How a PsClient's requests reach the servers and their replies come back, whatever happens to
// the servers meanwhile. PsClient says what to send (a step's push and pull, a barrier, a
// checkpoint); this class says where, and what to do when a server goes, comes back, moves or
// refuses. It owns the request connections, one per server task, and reads the heartbeats and
// the shard map that PsClient keeps.
//
// Faults: a request to a server that restarts (or comes back after a silence) is sent again, as
// a round: all of that server's unanswered requests in their first order, so that a pull never
// overtakes the push before it. A server that restarted has no variables: the chief gives it its
// values again (the `reinit` register PsClient supplies) and the others wait for that. A server
// unreachable for longer than the unavailable timeout fails the exchange, naming it.
//
// Replicas (docs/replication.md section 4): shard s's requests go to the head of its chain in the
// newest map ShardRoutes knows; a newer epoch on any reply or heartbeat, or a kAborted reply,
// fetches the map, and the unanswered requests of a shard whose head moved go to the new head, in
// their first order. Shards the chief's chain master restarted empty (MarkFresh) get the chief's
// values before anything else.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/wire/transport.h"
#include "worker/distributed/heartbeat.h"
#include "worker/distributed/shard_routes.h"

namespace pstrain {
namespace worker {

class RequestRouter {
 public:
  struct Options {
    std::string who;                 // this role in logs: "worker 1"
    std::vector<std::string> hosts;  // by task: the servers' addresses, for their names in logs
    // The chief's register that gives shard s its values again (a server that restarted lost
    // them); unset for every other role, which waits for the chief's instead.
    std::function<wire::Message(int shard)> reinit;
  };
  // `servers`: one request connection per task. `heartbeat` (may be null: every server counts as
  // up) and `routes` belong to the caller and outlive every exchange.
  RequestRouter(std::vector<std::unique_ptr<wire::Connection>> servers,
                const HeartbeatMonitor* heartbeat, ShardRoutes* routes, Options options);
  ~RequestRouter();

  // Requests sent and not yet answered: an exchange in three calls, Start, Send each request (it
  // leaves at once), then Await the replies.
  struct InFlight;
  std::shared_ptr<InFlight> Start();  // shared: deleted where InFlight is whole
  // Sends shard `shard`'s request to its head.
  Status Send(InFlight* f, int shard, wire::Message message);
  // Waits for every reply, returned in the order sent; `on_reply` (if set) sees each as it
  // arrives, by its index. Retries, resends and re-initialisations happen here.
  Result<std::vector<wire::Message>> Await(
      InFlight* f, std::chrono::milliseconds timeout,
      const std::function<void(size_t, const wire::Message&)>& on_reply = {});
  // Waits until the requests `wanted` (indices in the order sent) are answered, taking every
  // other reply that comes meanwhile (`on_reply` sees each); the rest stay in flight for a later
  // AwaitSome or Await.
  Status AwaitSome(InFlight* f, std::chrono::milliseconds timeout,
                   const std::vector<size_t>& wanted,
                   const std::function<void(size_t, const wire::Message&)>& on_reply = {});
  // The three calls at once, for one request per (shard, message) (or, with `to_tasks`, per
  // (server task, message): task-level requests).
  Result<std::vector<wire::Message>> Exchange(const std::vector<std::pair<int, wire::Message>>& out,
                                              std::chrono::milliseconds timeout,
                                              bool to_tasks = false);

  // Shard `shard` was restarted empty by the chief's chain master: the next exchange gives it the
  // chief's values first. Any thread.
  void MarkFresh(int shard);
  // How long requests wait for a server that is down before failing (default 10 minutes).
  void set_unavailable_timeout(std::chrono::seconds t) { unavailable_timeout_ = t; }
  int num_servers() const { return static_cast<int>(servers_.size()); }
  std::string ServerName(int s) const;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // `shard` -1: a task-level request to `task`; else shard's request, to `task` its head.
  Status SendTo(InFlight* f, int shard, int task, wire::Message message);
  // Await's stages: what the heartbeats say of server `s`; sending pending request `k`, a
  // server's round, a chief's re-initialisation, a shard's requests to its head; following the
  // shard map; resending to servers that came back; an error reply; a reply taken.
  HeartbeatMonitor::Health HealthOf(int s) const;
  Status SendPending(const InFlight& f, size_t k);
  Status SendRound(InFlight* f, int s);
  Status Reinit(InFlight* f, int shard, int server, wire::Message message);
  Status SendShard(InFlight* f, int s);
  Status FollowRoutes(InFlight* f, std::chrono::milliseconds timeout, TimePoint* deadline,
                      bool* any_down);
  Status InitializeFreshShards(InFlight* f);
  // A reply no request of the exchange taking it is waiting for: kept for the exchange that sent
  // it (a step's per-layer pulls or pushed parts are in flight while its rows are exchanged, on
  // the same connections), the oldest dropped beyond kMaxStashed; and this exchange's taken.
  void Stash(int server, wire::Message reply);
  Status TakeStashed(InFlight* f, const std::function<void(size_t, const wire::Message&)>& on_reply,
                     std::chrono::milliseconds* backoff);
  // Takes the replies already received from every server but `waited_on` with requests in flight.
  Status TakeWaitingReplies(InFlight* f, int waited_on,
                            const std::function<void(size_t, const wire::Message&)>& on_reply,
                            std::chrono::milliseconds* backoff);
  Status ResendToServers(InFlight* f, std::chrono::milliseconds timeout, TimePoint* deadline,
                         bool* any_down);
  Status HandleRefusal(InFlight* f, size_t k, int server, const Status& status,
                       std::chrono::milliseconds* backoff);
  // Await's loop, until every request `wanted` says it waits for is answered.
  Status AwaitUntil(InFlight* f, std::chrono::milliseconds timeout,
                    const std::function<void(size_t, const wire::Message&)>& on_reply,
                    const std::function<bool(size_t)>& wanted);
  Status TakeReply(InFlight* f, int server, wire::Message reply,
                   const std::function<void(size_t, const wire::Message&)>& on_reply,
                   std::chrono::milliseconds* backoff);

  std::vector<std::unique_ptr<wire::Connection>> servers_;
  const HeartbeatMonitor* heartbeat_;
  ShardRoutes* routes_;
  Options options_;
  uint64_t next_id_ = 1;
  std::chrono::seconds unavailable_timeout_{600};
  std::mutex fresh_mu_;
  std::vector<int> fresh_;  // shards the chain master restarted empty: the chief initialises them
  static constexpr size_t kMaxStashed = 1024;
  std::deque<std::pair<int, wire::Message>> stashed_;  // (server, reply) of other exchanges
};

}  // namespace worker
}  // namespace pstrain
