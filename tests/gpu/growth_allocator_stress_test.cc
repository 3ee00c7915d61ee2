// Randomized and multi-threaded use of GrowthAllocator over host memory,
// checking invariants.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "worker/memory/growth_allocator.h"
#include "worker/memory/host_backing.h"

namespace pstrain {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

struct Live {
  size_t size = 0;  // as allocated, AllocatedSize()
  unsigned char fill = 0;
};

bool Filled(const void *ptr, size_t bytes, unsigned char fill) {
  const auto *p = static_cast<const unsigned char *>(ptr);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != fill) return false;
  }
  return true;
}

std::unique_ptr<GrowthAllocator> MakeGrowing(HostBacking *backing) {
  GrowthAllocatorOptions options;
  options.initial_region_bytes = 1 * kMiB;
  auto allocator = GrowthAllocator::Create(backing, options);
  CHECK(allocator.ok()) << allocator.status().ToString();
  return std::move(allocator).value();
}

TEST(GrowthAllocatorStressTest, RandomAllocAndFreeKeepInvariants) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeGrowing(&backing);
  std::mt19937 rng(1234);
  std::map<uintptr_t, Live> live;
  size_t live_bytes = 0;
  int failures = 0;

  for (int step = 0; step < 6000; ++step) {
    const bool allocate = live.empty() || rng() % 100 < 55;
    if (allocate) {
      // Mostly small tensors, now and then a large one.
      const size_t bytes =
          rng() % 20 == 0 ? 1 * kMiB + rng() % (4 * kMiB) : 1 + rng() % (64 * kKiB);
      Result<void *> ptr = allocator->Allocate(bytes);
      if (!ptr.ok()) {
        ASSERT_EQ(ptr.status().code(), StatusCode::kResourceExhausted);
        ++failures;
        continue;
      }
      const auto addr = reinterpret_cast<uintptr_t>(*ptr);
      const size_t size = allocator->AllocatedSize(*ptr);
      ASSERT_GE(size, bytes);
      ASSERT_EQ(addr % GrowthAllocator::kAlignment, 0u);
      // No overlap with the live neighbours on either side.
      auto next = live.lower_bound(addr);
      if (next != live.end()) {
        ASSERT_LE(addr + size, next->first) << "overlaps the next chunk";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second.size, addr) << "overlaps the previous chunk";
      }
      const auto fill = static_cast<unsigned char>(step);
      std::memset(*ptr, fill, size);
      live[addr] = {size, fill};
      live_bytes += size;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(Filled(reinterpret_cast<void *>(it->first), it->second.size, it->second.fill))
          << "memory of a live allocation was overwritten";
      allocator->Free(reinterpret_cast<void *>(it->first));
      live_bytes -= it->second.size;
      live.erase(it);
    }
    const AllocatorStats stats = allocator->stats();
    ASSERT_EQ(stats.bytes_in_use, live_bytes);
    ASSERT_LE(stats.bytes_reserved, stats.bytes_limit);
    ASSERT_GE(stats.peak_bytes_in_use, stats.bytes_in_use);
  }
  LOG(INFO) << allocator->DebugString() << "; " << failures << " requests failed";

  for (const auto &[addr, entry] : live) {
    ASSERT_TRUE(Filled(reinterpret_cast<void *>(addr), entry.size, entry.fill));
    allocator->Free(reinterpret_cast<void *>(addr));
  }
  EXPECT_EQ(allocator->stats().bytes_in_use, 0u);
  for (const RegionInfo &region : allocator->Regions()) EXPECT_EQ(region.num_chunks, 1u);
}

TEST(GrowthAllocatorStressTest, ConcurrentThreadsAllocateWithoutSharingMemory) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeGrowing(&backing);
  constexpr int kThreads = 8;
  std::vector<int> corrupted(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      const auto fill = static_cast<unsigned char>(t + 1);
      std::vector<std::pair<void *, size_t>> mine;
      for (int step = 0; step < 2000; ++step) {
        if (mine.empty() || rng() % 2 == 0) {
          const size_t bytes = 1 + rng() % (32 * kKiB);
          Result<void *> ptr = allocator->Allocate(bytes);
          if (!ptr.ok()) continue;
          std::memset(*ptr, fill, bytes);
          mine.emplace_back(*ptr, bytes);
        } else {
          const size_t i = rng() % mine.size();
          if (!Filled(mine[i].first, mine[i].second, fill)) ++corrupted[t];
          allocator->Free(mine[i].first);
          mine[i] = mine.back();
          mine.pop_back();
        }
      }
      for (auto &[ptr, bytes] : mine) {
        if (!Filled(ptr, bytes, fill)) ++corrupted[t];
        allocator->Free(ptr);
      }
    });
  }
  for (std::thread &thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(corrupted[t], 0) << "thread " << t;
  const AllocatorStats stats = allocator->stats();
  EXPECT_EQ(stats.bytes_in_use, 0u);
  EXPECT_GT(stats.num_allocs, 1000u);
  for (const RegionInfo &region : allocator->Regions()) EXPECT_EQ(region.num_chunks, 1u);
}

}  // namespace
}  // namespace pstrain
