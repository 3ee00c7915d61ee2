// The shard map (common/replication/shard_map.h) as a shardMap message carries it: one Chain per
// shard, its members head first and its joiners. Servers and clients read the map from the
// network with the same checks.
#pragma once

#include <vector>

#include "common/replication/shard_map.h"
#include "common/status.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// The map's chains as the wire carries them, one Chain per shard.
std::vector<Chain> ChainsOf(const replication::ShardMap& map);

// The map a shardMap message (a get reply, a set) carries: epoch `map_epoch` (at most 2^53), one
// chain per shard of `num_shards`, every task below `num_tasks` and in one place of its shard at
// most. Anything else is an InvalidArgument naming what is wrong (the bytes came from the
// network).
Result<replication::ShardMap> MapOfMessage(const Message& m, int num_shards, int num_tasks);

}  // namespace wire
}  // namespace pstrain
