#include "common/wire/shard_map_message.h"

#include <cstdint>
#include <set>
#include <string>

namespace pstrain {
namespace wire {

std::vector<Chain> ChainsOf(const replication::ShardMap& map) {
  std::vector<Chain> chains;
  for (int s = 0; s < map.num_shards(); ++s) {
    Chain c;
    c.shard = s;
    c.tasks.assign(map.chains[s].begin(), map.chains[s].end());
    if (s < static_cast<int>(map.joining.size())) {
      c.joining.assign(map.joining[s].begin(), map.joining[s].end());
    }
    chains.push_back(std::move(c));
  }
  return chains;
}

Result<replication::ShardMap> MapOfMessage(const Message& m, int num_shards, int num_tasks) {
  if (m.map_epoch > uint64_t{1} << 53) {
    return InvalidArgument("a shard map must carry map_epoch from 0 to 2^53, got " +
                           std::to_string(m.map_epoch));
  }
  if (static_cast<int>(m.chains.size()) != num_shards) {
    return InvalidArgument(
        "a shard map must carry one chain per shard: " + std::to_string(num_shards) +
        " (--ps_hosts), got " + std::to_string(m.chains.size()));
  }
  replication::ShardMap map;
  map.epoch = m.map_epoch;
  map.chains.resize(num_shards);
  map.joining.resize(num_shards);
  std::vector<bool> seen(num_shards, false);
  for (const Chain& c : m.chains) {
    const std::string which = "chains: shard " + std::to_string(c.shard);
    if (c.shard < 0 || c.shard >= num_shards) {
      return InvalidArgument(which + " is not one of the cluster's " + std::to_string(num_shards) +
                             " shards");
    }
    if (seen[c.shard]) return InvalidArgument(which + " is listed twice");
    seen[c.shard] = true;
    std::set<int> tasks;
    for (const auto* list : {&c.tasks, &c.joining}) {
      for (int32_t t : *list) {
        if (t < 0 || t >= num_tasks) {
          return InvalidArgument(which + " names task " + std::to_string(t) +
                                 ", not one of the cluster's " + std::to_string(num_tasks) +
                                 " server tasks");
        }
        if (!tasks.insert(t).second) {
          return InvalidArgument(which + " names task " + std::to_string(t) + " twice");
        }
      }
    }
    map.chains[c.shard].assign(c.tasks.begin(), c.tasks.end());
    map.joining[c.shard].assign(c.joining.begin(), c.joining.end());
  }
  return map;
}

}  // namespace wire
}  // namespace pstrain
