// A best-fit allocator with coalescing over regions reserved from a
// MemoryBacking, with TensorFlow's GPUBFCAllocator semantics for allow_growth
// and per_process_gpu_memory_fraction: the limit is memory_fraction x the
// backing's total; without growth the whole limit is reserved at once, with
// growth regions double in size as needed up to kGrowthFloor, then each adds a
// sixteenth of what is reserved, until the limit is reached.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "worker/memory/memory_backing.h"

namespace pstrain {

// Growing past this, a new region adds at most max(this, reserved / 16).
constexpr size_t kGrowthFloor = size_t{32} << 20;

struct GrowthAllocatorOptions {
  // TF's allow_growth: start small and grow, instead of taking the whole limit
  // up front.
  bool allow_growth = true;
  // TF's per_process_gpu_memory_fraction, in (0, 1].
  double memory_fraction = 1.0;
  // The first region's size when growing (capped at the limit).
  size_t initial_region_bytes = size_t{2} << 20;
};

struct AllocatorStats {
  size_t bytes_in_use = 0;  // sum of the (rounded) sizes of live allocations
  size_t peak_bytes_in_use = 0;
  size_t bytes_reserved = 0;  // sum of region sizes
  size_t bytes_limit = 0;
  size_t num_regions = 0;
  size_t num_allocs = 0;  // successful allocations since construction
  size_t largest_alloc = 0;
};

// One region's layout, for tests and debugging.
struct RegionInfo {
  size_t bytes = 0;
  size_t num_chunks = 0;
  size_t num_free_chunks = 0;
  size_t largest_free_chunk = 0;
};

class GrowthAllocator {
 public:
  static constexpr size_t kAlignment = 256;

  // `backing` must outlive the allocator. Fails on bad options or when the
  // first region cannot be reserved.
  static Result<std::unique_ptr<GrowthAllocator>> Create(MemoryBacking *backing,
                                                         const GrowthAllocatorOptions &options);
  // Gives every region back to the backing; live allocations are logged and
  // become invalid.
  ~GrowthAllocator();
  GrowthAllocator(const GrowthAllocator &) = delete;
  GrowthAllocator &operator=(const GrowthAllocator &) = delete;

  // Returns memory aligned to kAlignment, or ResourceExhausted naming the
  // request and the stats. A zero-byte request gets a minimal chunk, so every
  // pointer is distinct.
  Result<void *> Allocate(size_t bytes);
  // `ptr` must come from Allocate on this allocator and not be freed yet
  // (CHECKed).
  void Free(void *ptr);

  // With allow_growth, gives back to the backing every region that holds no live allocation
  // (after a large transient, such as cuDNN's autotuning workspace, so that the process keeps
  // only what it uses); returns the bytes given back.
  size_t ReleaseFreeRegions();

  // The usable size of a live allocation: the request rounded up to kAlignment.
  size_t AllocatedSize(const void *ptr) const;
  AllocatorStats stats() const;
  std::vector<RegionInfo> Regions() const;
  // One line for logs: stats with human-readable sizes.
  std::string DebugString() const;

 private:
  static constexpr int kNumBins = 21;  // size classes 256 B, 512 B, ..., 256 MiB and larger

  struct Chunk {
    size_t size = 0;
    size_t region = 0;  // index into regions_; chunks only coalesce within a region
    bool in_use = false;
  };
  struct Region {
    uintptr_t base = 0;
    size_t size = 0;  // 0 once given back (ReleaseFreeRegions); the slot keeps chunk indices
  };
  using FreeBin = std::set<std::pair<size_t, uintptr_t>>;  // (size, address), smallest first

  GrowthAllocator(MemoryBacking *backing, const GrowthAllocatorOptions &options, size_t limit);

  static int BinIndex(size_t size);
  Status AddRegion(size_t bytes);  // reserves and adds one free chunk spanning it
  // Reserves the next region for a request of `rounded` bytes, if the limit
  // allows.
  Status Grow(size_t rounded);
  // The smallest free chunk of at least `rounded` bytes, or chunks_.end().
  std::map<uintptr_t, Chunk>::iterator FindBestFit(size_t rounded);
  void InsertFree(uintptr_t addr, const Chunk &chunk);
  void RemoveFree(uintptr_t addr, const Chunk &chunk);
  Status OutOfMemory(size_t bytes, const Status &cause) const;
  std::string DebugStringLocked() const;

  MemoryBacking *const backing_;
  const GrowthAllocatorOptions options_;
  const size_t limit_;

  mutable std::mutex mu_;
  std::vector<Region> regions_;
  std::map<uintptr_t, Chunk> chunks_;  // every chunk of every region, by address
  std::array<FreeBin, kNumBins> bins_;
  AllocatorStats stats_;
};

// "1.5 GiB", "300.0 MiB", "12.0 KiB", "17 B": sizes for messages.
std::string FormatBytes(size_t bytes);

}  // namespace pstrain
