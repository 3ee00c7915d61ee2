// One number for a shard's whole state (every variable and optimizer slot, by name, and its table
// rows), so that the replicas of a shard can be compared without shipping their bytes: at
// shutdown each replica logs its CRC-32C, and tests/distributed/replication_test.py asserts every
// replica's equals its head's (docs/replication.md section 7: "lost acknowledged updates = 0");
// while a server joins, the head stamps records with a BLAKE2b of the same walk, which the joiner
// checks its copy against (ps/state_stamps.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ps/sparse_table.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

// CRC-32C over each state tensor's name and bytes, in name order (StateTensors' order), then
// over each of `tables`' name and its rows in id order (each id, its values and its slots):
// replicas create rows in different orders, and the order is no part of the state.
uint32_t StateCrc32c(const VariableStore& store,
                     const std::vector<const SparseTable*>& tables = {});

// BLAKE2b-256 over the same walk of `state` (StateTensors(): names and bytes, in name order) and
// `tables`, then `global_step`: the digest a head stamps on a record and a replica compares with
// its own (ps/state_stamps.h). A cryptographic hash, since the one who sent a joiner its copy
// must not be able to make another state with the head's digest.
std::string StateBlake2b(const std::map<std::string, Tensor>& state, int64_t global_step,
                         const std::vector<const SparseTable*>& tables = {});

}  // namespace ps
}  // namespace pstrain
