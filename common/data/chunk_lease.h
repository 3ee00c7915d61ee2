// What a lease of a chunk of the data says, as shard 0's data ledger grants it (ps/data_ledger.h)
// and a worker's example source reads it (worker/training/input/leased_source.h): both ends hold
// the same five numbers, so they share this one struct.
#pragma once

#include <cstdint>

namespace pstrain {
namespace data {

// Chunk `chunk` of epoch `epoch`, examples first .. first + size - 1 of the epoch's global order,
// of which the first `skip` in the chunk's order (chunk_order.h, ExampleOrder) are already used.
struct ChunkLease {
  int64_t epoch = 0;
  int64_t chunk = 0;
  int64_t skip = 0;
  int64_t first = 0;
  int64_t size = 0;
};

}  // namespace data
}  // namespace pstrain
