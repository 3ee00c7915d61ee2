// Where a client sends each shard's requests (docs/replication.md section 4, "Workers learn the
// map"). With --replicas=0 shard s lives on task s and nothing here talks to anyone. With
// replicas, shard s's requests go to the head of its chain in the newest shard map this client
// knows; every reply (heartbeats included) tells the epoch of the map its sender holds, and a
// higher one, or a kAborted reply ("not the head"), makes the client fetch the map: a `shardMap`
// get to every live server task, taking the highest epoch.
//
// The fetch uses connections of its own (MapConnections), so that it never reads a reply meant
// for PsClient's exchange under way. ShardMaster (the chief's chain master) uses the same class
// to send its maps.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/replication/shard_map.h"
#include "common/wire/transport.h"

namespace pstrain {
namespace worker {

// One connection per server task for shard-map requests.
class MapConnections {
 public:
  using Connector = std::function<Result<std::unique_ptr<wire::Connection>>(int task)>;
  MapConnections(int num_tasks, Connector connect);
  ~MapConnections();
  // Sends each (task, request) and waits up to `timeout` for all their replies, returned in the
  // same order; a task that does not answer in time gets Unavailable, an error reply its status.
  // A connection that timed out is opened afresh next time (a dead task's queue only grows).
  std::vector<Result<wire::Message>> Call(const std::vector<std::pair<int, wire::Message>>& out,
                                          std::chrono::milliseconds timeout);

 private:
  Connector connect_;
  std::vector<std::unique_ptr<wire::Connection>> connections_;
  uint64_t next_id_ = 1;
};

class ShardRoutes {
 public:
  // `replicas` = 0: identity routing, no fetch ever. Otherwise the routes start at `placement`'s
  // heads under epoch 0 (so a first request reaches the placed head, which answers kAborted
  // until the chief has sent it a map).
  // `check` (if set) decides whether a server's map may be followed: the chief's proof of it
  // (common/wire/map_proof.h), given the map and the reply that carried it.
  using MapCheck = std::function<Status(const replication::ShardMap&, const wire::Message&)>;
  ShardRoutes(int num_tasks, int replicas, std::string role, int task_index,
              MapConnections::Connector connect, MapCheck check = {});

  bool replicated() const { return replicas_ > 0; }
  int replicas() const { return replicas_; }
  int num_shards() const { return num_tasks_; }
  // The task taking shard s's requests; -1 while the shard has no member.
  int Head(int shard) const;
  // The `shard` field of a request for shard s: s with replicas, -1 (the task's own) without.
  int32_t ShardField(int shard) const { return replicated() ? shard : -1; }
  uint64_t epoch() const;
  replication::ShardMap map() const;
  // An epoch some server holds, from a reply.
  void Observe(uint64_t epoch);
  // Whether a server showed a newer map than this one.
  bool Behind() const { return seen_.load() > epoch(); }
  // Takes `map` when its epoch is higher than the one held (the chief's own maps); true if so.
  bool Adopt(const replication::ShardMap& map);
  // Asks every task for which `live` is true for its map and adopts the highest epoch among
  // the well-formed replies that pass the check; true when the routes changed. An error only
  // when no task answered. A map that fails the check is logged and ignored, and the epoch it
  // claims is forgotten (Behind() does not stay true because of it).
  Result<bool> Fetch(const std::function<bool(int)>& live, std::chrono::milliseconds timeout);

 private:
  const int num_tasks_;
  const int replicas_;
  std::string role_;
  int task_index_;
  mutable std::mutex mu_;  // guards map_ (PsClient's thread and the chief's ShardMaster)
  replication::ShardMap map_;
  std::atomic<uint64_t> seen_{0};
  std::mutex fetch_mu_;  // one fetch at a time over connections_
  MapConnections connections_;
  MapCheck check_;
};

// The check of a map against the chief's proof for `own` (common/wire/map_proof.h); none
// (every map followed) in plaintext.
ShardRoutes::MapCheck MapCheckOf(const wire::ClusterKeys& own);

}  // namespace worker
}  // namespace pstrain
