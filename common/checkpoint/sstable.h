// LevelDB's table format (an SSTable), which TensorFlow's tensor bundle uses for its `.index`
// file (tensorflow/core/lib/io/table_builder.cc, block_builder.cc, format.cc):
//   data blocks   entries of sorted keys, each key sharing a prefix with the one before it
//                 (varint32 shared, varint32 unshared, varint32 value bytes, the key's new bytes,
//                 the value); every 16th entry a restart with the whole key; then the restarts'
//                 offsets as fixed32 and their count
//   each block is followed by a 5-byte trailer: compression type (0, none) and the masked
//                 CRC-32C of the block and that byte
//   metaindex     an empty block
//   index block   one entry per data block: a key >= its last key -> its BlockHandle
//                 (varint64 offset, varint64 size)
//   footer        metaindex and index handles, zero padding to 40 bytes, the 8-byte magic
//                 0xdb4775248b80fb57 (little-endian)
// Only what a bundle needs: a table built whole in memory, no compression, no filters.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pstrain {

using TableEntries = std::vector<std::pair<std::string, std::string>>;

// The table's bytes for `entries`, whose keys must be strictly increasing bytewise
// (InvalidArgument naming the first key out of order). A data block is closed once it
// reaches `block_size` bytes.
Result<std::string> BuildTable(const TableEntries& entries, size_t block_size = 4096);

// The entries of `table`, in key order. DataLoss naming `source` (the file) and what is wrong
// when the footer, a block handle, a checksum, an entry or the key order is not as written above.
Result<TableEntries> ReadTable(std::string_view table, const std::string& source);

}  // namespace pstrain
