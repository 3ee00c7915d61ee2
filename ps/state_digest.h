// One number for a shard's whole state (every variable and optimizer slot, by name), so that the
// replicas of a shard can be compared without shipping their bytes: at shutdown each replica logs
// it, and tests/distributed/replication_test.py asserts every replica's equals its head's
// (docs/replication.md section 7: "lost acknowledged updates = 0").
#pragma once

#include <cstdint>

#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

// CRC-32C over each state tensor's name and bytes, in name order (StateTensors' order).
uint32_t StateCrc32c(const VariableStore& store);

}  // namespace ps
}  // namespace pstrain
