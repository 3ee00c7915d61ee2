// The shard map: which server tasks hold each shard, as chains of chain replication (each update
// goes head to tail; a reply leaves the head once the tail holds it), numbered by an epoch.
// docs/replication.md sections 1 and 4.
//
// Pure functions and no sockets, as Sharding is: every process computes the epoch-1 map from the
// flags (PlaceReplicas), and the chief alone computes the later ones (NextMap, PromoteJoiner)
// from what its heartbeats see. The map travels as a `shardMap` message (section 3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {
namespace replication {

struct ShardMap {
  uint64_t epoch = 0;
  // chains[s]: the members of shard s's chain, head first. Shard s's index is the `task` that
  // Sharding gives its partitions.
  std::vector<std::vector<int>> chains;
  // joining[s]: tasks still copying shard s, behind its tail in this order. A joiner is no
  // replica yet: it never becomes head, and it counts only once PromoteJoiner makes it a member.
  std::vector<std::vector<int>> joining;

  int num_shards() const { return static_cast<int>(chains.size()); }
  // The task taking shard s's requests, or -1 while the shard has no member.
  int head(int shard) const;
  // One line for logs: "map epoch 2: shard 0 [0 1], shard 1 [2] joining [1], shard 2 []".
  std::string Describe() const;

  bool operator==(const ShardMap& other) const {
    return epoch == other.epoch && chains == other.chains && joining == other.joining;
  }
};

// Epoch 1. Shard s's chain starts at task s (with `replicas` = 0 nothing moves), and its backups
// walk the ring s+1, s+2, ... taking first the tasks on hosts not yet in the chain. A host is an
// entry's host part; localhost and 127.* are one host. With fewer hosts than 1 + replicas the
// walk fills in ring order and logs which host holds several of a shard's replicas.
// `replicas` >= the number of servers, or < 0, is an InvalidArgument naming the flags.
Result<ShardMap> PlaceReplicas(const std::vector<std::string>& ps_hosts, int replicas);

// What the chief's heartbeats say of a task.
enum class TaskHealth {
  kUp,
  kDown,       // no heartbeat reply for HeartbeatOptions::timeout
  kRestarted,  // answers under a new incarnation: whatever it held is gone
};

struct MapChange {
  ShardMap map;  // the same epoch when nothing changed, else one more
  // Shards whose last member left in this change ("shard s lost every replica").
  std::vector<int> lost;
  // Shards whose head in `map` holds nothing: a shard that had no member and got, as its head,
  // the first live task of its placed chain. The chief initialises or restores it, as it does a
  // restarted server without replicas. A lost shard with a live placed task is in both lists.
  std::vector<int> fresh;
};

// The map after `health` (one entry per task). A task down or restarted leaves every chain and
// every joining list; where it was head, the next member (never a joiner) becomes head. A task
// up, and missing from a chain `placement` gives it, is appended to that shard's joiners; a head
// is never handed back. Every change raises the epoch by one, however many tasks it concerns.
// `placement` is PlaceReplicas' map for the cluster.
Result<MapChange> NextMap(const ShardMap& map, const std::vector<TaskHealth>& health,
                          const ShardMap& placement);

// The map once `task`, joining `shard`, has caught up with its predecessor: it becomes the
// chain's tail member (joiners behind it keep their order), at the next epoch. A task that is not
// joining the shard is an InvalidArgument (a report from an older map).
Result<ShardMap> PromoteJoiner(const ShardMap& map, int shard, int task);

}  // namespace replication
}  // namespace pstrain
