// One number for a shard's whole state (every variable and optimizer slot, by name, and its table
// rows), so that the
// replicas of a shard can be compared without shipping their bytes: at shutdown each replica logs
// it, and tests/distributed/replication_test.py asserts every replica's equals its head's
// (docs/replication.md section 7: "lost acknowledged updates = 0").
#pragma once

#include <cstdint>
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

}  // namespace ps
}  // namespace pstrain
