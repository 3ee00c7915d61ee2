// The orders that make elastic data deterministic (docs/replication.md section 6, "Data,
// exactly once per epoch"): an epoch's examples, in the sorted file list's global record order,
// are cut into chunks; shard 0's data ledger (ps/data_ledger.h) hands epoch e's chunks out in
// ChunkOrder(seed, e), and a worker reads a chunk's examples in ExampleOrder(seed, e, chunk).
// Both ends, and a worker that takes over a departed one's chunk with `skip` examples already
// used, must draw the same orders, so they are written here once, with a hand-written shuffle:
// std::shuffle and the standard distributions may differ between standard libraries.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace pstrain {
namespace data {

// The most examples one chunk may hold: a worker allocates a chunk's order from a lease reply's
// size, so the size a server may name is bounded (--data_chunk is checked against it).
constexpr int64_t kMaxChunkExamples = int64_t{1} << 20;

// splitmix64's finaliser: spreads a seed's bits, so that nearby seeds draw unrelated orders.
inline uint64_t MixSeed(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 0..n-1 shuffled (Fisher-Yates) by a splitmix64 stream seeded from `key`.
inline std::vector<int64_t> Permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> order(static_cast<size_t>(n > 0 ? n : 0));
  std::iota(order.begin(), order.end(), int64_t{0});
  uint64_t state = key;
  for (int64_t i = n - 1; i > 0; --i) {
    state = MixSeed(state);
    const int64_t j = static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

// Chunks per epoch: the last one holds the remainder.
inline int64_t ChunkCount(int64_t examples, int64_t chunk_size) {
  return (examples + chunk_size - 1) / chunk_size;
}

// Examples in chunk `chunk`, and the first of them in the epoch's global order.
inline int64_t ChunkFirst(int64_t chunk, int64_t chunk_size) { return chunk * chunk_size; }
inline int64_t ChunkSize(int64_t examples, int64_t chunk_size, int64_t chunk) {
  const int64_t rest = examples - chunk * chunk_size;
  return rest < chunk_size ? rest : chunk_size;
}

// The order in which epoch `epoch`'s `chunks` chunks are leased out.
inline std::vector<int64_t> ChunkOrder(uint64_t seed, int64_t epoch, int64_t chunks) {
  return Permutation(chunks, MixSeed(seed ^ MixSeed(static_cast<uint64_t>(epoch))));
}

// The order in which a chunk's `size` examples are read: offsets within the chunk.
inline std::vector<int64_t> ExampleOrder(uint64_t seed, int64_t epoch, int64_t chunk,
                                         int64_t size) {
  const uint64_t key = MixSeed(MixSeed(seed ^ MixSeed(static_cast<uint64_t>(epoch))) ^
                               MixSeed(static_cast<uint64_t>(chunk) + 0x51ed27ULL));
  return Permutation(size, key);
}

}  // namespace data
}  // namespace pstrain
