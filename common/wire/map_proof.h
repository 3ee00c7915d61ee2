// The chief's proof of a shard map (docs/replication.md section 4). Clients learn the map from
// the servers, which only pass on what the chief set; a server's key must not be able to steer
// them (a map of a far-future epoch, offered by one server, used to take every worker's pushes
// for good). So the chief attaches to each map one tag per client key, made with PairTag
// (pair_tag.h) from its secret key and that client's public key over the map's bytes, and a
// client follows a map only if its own tag checks out. Servers store and return the tags
// untouched; they cannot make one. Epochs are then bounded by what the chief has issued.
//
// Plaintext clusters carry no proofs and check none (nothing is authenticated there).
#pragma once

#include <vector>

#include "common/replication/shard_map.h"
#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"

namespace pstrain {
namespace wire {

// The key name of the chief, whose key proves maps.
constexpr char kChiefKeyName[] = "worker-0";

// The proofs of `map` for every client key in `chief` (the chief's own keys): workers,
// evaluators and the chief itself.
Result<std::vector<MapProof>> ProveMap(const replication::ShardMap& map, const ClusterKeys& chief);

// OK if `proofs` hold this client's (`own`'s) valid proof of `map` from the chief's key; else
// an error naming what is wrong. OK without checking in plaintext (`own` without keys).
Status CheckMapProof(const replication::ShardMap& map, const std::vector<MapProof>& proofs,
                     const ClusterKeys& own);

}  // namespace wire
}  // namespace pstrain
