// The chain master (docs/replication.md section 4): with --replicas > 0 the chief alone decides
// the shard map, so that no two tasks ever both act as a shard's head. It sends every server the
// epoch-1 map at start (each shard's placed head alone, its backups joining by copy), then
// watches the chief's heartbeats: a task found down leaves its chains (a head's next member takes
// over), a task back or restarted rejoins as a joiner, and a joiner its tail reports caught up
// (in a shardMap get reply's `caught_up`) becomes a member once its own reply says so too (the
// head's stamp has verified the copy the tail sent it, ps/state_stamps.h). Each change is one new
// epoch, sent to every live server; a shard left with no member starts afresh and the chief
// initialises it from its own values, as it re-initialises a restarted server without replicas.
//
// With keys, every map it sends carries its proofs, one per client key (common/wire/map_proof.h):
// clients follow no map a server made up.
//
// The decisions are pure functions below (tested without sockets); ShardMaster is the small part
// that sends, on connections of its own, from a thread of its own. A chief that restarts takes
// the highest epoch the servers hold instead of starting again at 1.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/replication/shard_map.h"
#include "worker/distributed/heartbeat.h"
#include "worker/distributed/shard_routes.h"

namespace pstrain {
namespace worker {

// Epoch 1 from PlaceReplicas' map: each shard's placed head alone, its backups joining.
replication::ShardMap StartingMap(const replication::ShardMap& placement);

// How the heartbeats' view of a task reads to NextMap: down when not up, restarted when a new
// incarnation answers the task whose incarnation was `known` (0: none known yet), else up.
replication::TaskHealth JudgeTask(const HeartbeatMonitor::Health& seen, uint64_t known);

// NextMap over what the heartbeats `seen` of each task; `known` (one per task) holds the
// incarnations judged so far and is updated to the ones seen up.
Result<replication::MapChange> DecideOnHealth(const replication::ShardMap& map,
                                              const replication::ShardMap& placement,
                                              const std::vector<HeartbeatMonitor::Health>& seen,
                                              std::vector<uint64_t>* known);

// The tasks to poll: the tail (the member that copies) and the joiners of each shard with joiners,
// each task once, in order.
std::vector<int> TasksToPoll(const replication::ShardMap& map);

struct Promotion {
  int shard = 0;
  int task = 0;
};
// The map after the polled tasks' shardMap get replies, given as (task, reply): a task that
// `map` has joining a shard becomes a member when the shard's tail lists it as caught up
// (`caught_up`) for that shard and its own reply lists itself so (a joiner does once the head's
// stamp has verified its copy: the tail's word alone does not make a member of a joiner whose
// copy it made). Replies under another epoch than `map`'s report on another map and are
// ignored, as is anything malformed. All promotions together make one new epoch; `promoted`
// lists them.
replication::ShardMap PromoteCaughtUp(const replication::ShardMap& map,
                                      const std::vector<std::pair<int, wire::Message>>& replies,
                                      std::vector<Promotion>* promoted);

// The map to start from, after each task's answer to a shardMap get (`held[t]`, nullopt where
// t did not answer): the highest epoch held, or StartingMap when none has one. `empty` gets the
// tasks that answered without a map while others have one (they restarted unseen).
replication::ShardMap ChooseStartMap(const replication::ShardMap& placement,
                                     const std::vector<std::optional<replication::ShardMap>>& held,
                                     std::vector<int>* empty);

class ShardMaster {
 public:
  struct Options {
    MapConnections::Connector connect;
    std::function<HeartbeatMonitor::Health(int task)> health;  // the chief's heartbeats
    std::function<void(int shard)> fresh;  // a shard restarted empty: initialise it
    // The chief's proofs of a map it sends (common/wire/map_proof.h), and the check of a map a
    // server holds, before the chief takes it on at start; unset: plaintext, none.
    std::function<Result<std::vector<wire::MapProof>>(const replication::ShardMap&)> prove;
    ShardRoutes::MapCheck check;
    std::chrono::milliseconds watch_interval{200};
    std::chrono::milliseconds joiner_poll{500};
    std::chrono::milliseconds call_timeout{1000};
  };
  // `routes` (the chief's own PsClient's) follows every map sent; `who` names the chief in logs.
  static Result<std::unique_ptr<ShardMaster>> Create(const std::vector<std::string>& ps_hosts,
                                                     int replicas, std::string who,
                                                     ShardRoutes* routes, Options options);
  ~ShardMaster();

  // Asks every server for its map (waiting up to `timeout` for them all), takes the starting
  // map and sends it to every live server.
  Status Start(std::chrono::seconds timeout);
  // From now on a thread follows the heartbeats and the joiners.
  void Watch();
  void Stop();
  replication::ShardMap map() const;

 private:
  ShardMaster(replication::ShardMap placement, std::string who, ShardRoutes* routes,
              Options options);
  void Run();
  // Sends map_ (a set) to every live server, each until it answers or is found down.
  void Publish();
  void PollJoiners();
  wire::Message Get() const;

  const replication::ShardMap placement_;
  const std::string who_;
  ShardRoutes* routes_;
  Options options_;
  MapConnections connections_;
  mutable std::mutex mu_;  // guards map_ against map()
  replication::ShardMap map_;
  std::vector<uint64_t> known_;  // incarnations judged so far
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace worker
}  // namespace pstrain
