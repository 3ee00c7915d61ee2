#include "worker/memory/growth_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "worker/memory/host_backing.h"

namespace pstrain {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

std::unique_ptr<GrowthAllocator> MakeAllocator(HostBacking *backing, bool allow_growth,
                                               double fraction = 1.0,
                                               size_t initial_region_bytes = 2 * kMiB) {
  GrowthAllocatorOptions options;
  options.allow_growth = allow_growth;
  options.memory_fraction = fraction;
  options.initial_region_bytes = initial_region_bytes;
  auto allocator = GrowthAllocator::Create(backing, options);
  CHECK(allocator.ok()) << allocator.status().ToString();
  return std::move(allocator).value();
}

void *MustAllocate(GrowthAllocator *allocator, size_t bytes) {
  Result<void *> ptr = allocator->Allocate(bytes);
  CHECK(ptr.ok()) << ptr.status().ToString();
  return *ptr;
}

TEST(GrowthAllocatorTest, GrowthDoublesRegionSizesAndStopsAtTheLimit) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  EXPECT_EQ(allocator->stats().bytes_reserved, 2 * kMiB);

  std::vector<void *> ptrs;
  for (int i = 0; i < 64; ++i) ptrs.push_back(MustAllocate(allocator.get(), kMiB));

  std::vector<size_t> sizes;
  for (const RegionInfo &region : allocator->Regions()) sizes.push_back(region.bytes / kMiB);
  // 2+4+8+16+32 = 62 MiB, and the last region is exactly what is left of the 64
  // MiB limit.
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 4, 8, 16, 32, 2}));
  EXPECT_EQ(allocator->stats().bytes_reserved, 64 * kMiB);
  EXPECT_EQ(backing.bytes_reserved(), 64 * kMiB);
  EXPECT_EQ(backing.num_reserves(), 6u);

  Result<void *> over = allocator->Allocate(kMiB);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(backing.num_reserves(), 6u);
  for (void *p : ptrs) allocator->Free(p);
}

TEST(GrowthAllocatorTest, PastTheFloorGrowthReservesWithinATenthOfWhatIsInUse) {
  HostBacking backing(size_t{4} << 30);  // reserved, never touched: no real memory is used
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  std::vector<void *> ptrs;
  size_t most_over = 0;
  std::mt19937 rng(5);
  std::uniform_int_distribution<size_t> bytes(kKiB, 2 * kMiB);  // activations, gradients
  while (allocator->stats().bytes_in_use < (size_t{1} << 30)) {
    ptrs.push_back(MustAllocate(allocator.get(), bytes(rng)));
    const AllocatorStats s = allocator->stats();
    const size_t over = s.bytes_reserved - s.bytes_in_use;
    most_over = std::max(most_over, over);
    // The last region's free tail, and less than a request that each region cannot fit.
    ASSERT_LE(over, std::max(kGrowthFloor, s.bytes_in_use / 15) + 2 * kMiB * s.num_regions)
        << "reserved " << s.bytes_reserved << " for " << s.bytes_in_use << " in use";
  }
  // Doubling would have reserved 2 GiB - 2 MiB for these 1 GiB.
  const AllocatorStats s = allocator->stats();
  EXPECT_LE(s.bytes_reserved, s.bytes_in_use + s.bytes_in_use / 10) << s.num_regions << " regions";
  EXPECT_GT(most_over, 0u);
  for (void *p : ptrs) allocator->Free(p);
}

TEST(GrowthAllocatorTest, ReleasingGivesBackOnlyRegionsWithNoLiveAllocation) {
  HostBacking backing(size_t{1} << 30);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  void *small = MustAllocate(allocator.get(), kMiB);            // in the first 2 MiB region
  void *transient = MustAllocate(allocator.get(), 300 * kMiB);  // a region of its own
  const size_t before = allocator->stats().bytes_reserved;
  ASSERT_GE(before, 302 * kMiB);
  EXPECT_EQ(allocator->ReleaseFreeRegions(), 0u);  // both regions hold live memory
  allocator->Free(transient);
  const size_t released = allocator->ReleaseFreeRegions();
  EXPECT_GE(released, 300 * kMiB);
  EXPECT_EQ(allocator->stats().bytes_reserved, before - released);
  EXPECT_EQ(backing.bytes_reserved(), before - released);
  EXPECT_EQ(allocator->stats().num_regions, allocator->Regions().size());
  // The live allocation is untouched and the allocator grows again as needed.
  std::memset(small, 7, kMiB);
  void *again = MustAllocate(allocator.get(), 300 * kMiB);
  std::memset(again, 1, 300 * kMiB);
  EXPECT_GE(allocator->stats().bytes_reserved, before - released + 300 * kMiB);
  allocator->Free(again);
  allocator->Free(small);
}

TEST(GrowthAllocatorTest, WithoutGrowthNothingIsGivenBack) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/false, 0.5);
  EXPECT_EQ(allocator->ReleaseFreeRegions(), 0u);
  EXPECT_EQ(allocator->stats().bytes_reserved, 32 * kMiB);
}

TEST(GrowthAllocatorTest, GrowthReservesAtLeastTheRoundedRequest) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  void *big = MustAllocate(allocator.get(), 10 * kMiB + 1);
  std::vector<RegionInfo> regions = allocator->Regions();
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[1].bytes, 10 * kMiB + 256);
  allocator->Free(big);
}

TEST(GrowthAllocatorTest, WithoutGrowthTheWholeLimitIsReservedUpFront) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/false, /*fraction=*/0.5);
  EXPECT_EQ(backing.bytes_reserved(), 32 * kMiB);
  EXPECT_EQ(allocator->stats().num_regions, 1u);
  EXPECT_EQ(allocator->stats().bytes_limit, 32 * kMiB);

  void *all = MustAllocate(allocator.get(), 32 * kMiB);
  EXPECT_EQ(allocator->Allocate(1).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(backing.num_reserves(), 1u);
  allocator->Free(all);
}

TEST(GrowthAllocatorTest, BestFitPicksTheSmallestFittingChunk) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/false);
  // Free holes of 4 KiB, 1 KiB and 2 KiB, kept apart by live separators.
  void *a = MustAllocate(allocator.get(), 4 * kKiB);
  void *sep1 = MustAllocate(allocator.get(), 256);
  void *b = MustAllocate(allocator.get(), 1 * kKiB);
  void *sep2 = MustAllocate(allocator.get(), 256);
  void *c = MustAllocate(allocator.get(), 2 * kKiB);
  void *sep3 = MustAllocate(allocator.get(), 256);
  allocator->Free(a);
  allocator->Free(b);
  allocator->Free(c);

  EXPECT_EQ(MustAllocate(allocator.get(), 900), b);
  EXPECT_EQ(MustAllocate(allocator.get(), 1500), c);
  EXPECT_EQ(MustAllocate(allocator.get(), 3000), a);
  for (void *p : {a, b, c, sep1, sep2, sep3}) allocator->Free(p);
}

TEST(GrowthAllocatorTest, AllocationSplitsTheChunkAndLeavesTheRemainderFree) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/false);
  void *p = MustAllocate(allocator.get(), kKiB);
  std::vector<RegionInfo> regions = allocator->Regions();
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].num_chunks, 2u);
  EXPECT_EQ(regions[0].num_free_chunks, 1u);
  EXPECT_EQ(regions[0].largest_free_chunk, 64 * kMiB - kKiB);
  allocator->Free(p);
}

TEST(GrowthAllocatorTest, FreeingEverythingLeavesOneFreeChunkPerRegion) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  std::vector<void *> ptrs;
  for (int i = 0; i < 200; ++i)
    ptrs.push_back(MustAllocate(allocator.get(), (i % 7 + 1) * 37 * kKiB));
  ASSERT_GT(allocator->stats().num_regions, 2u);
  // Free the odd ones first so that frees merge with neighbours on both sides.
  for (size_t i = 1; i < ptrs.size(); i += 2) allocator->Free(ptrs[i]);
  for (size_t i = 0; i < ptrs.size(); i += 2) allocator->Free(ptrs[i]);
  for (const RegionInfo &region : allocator->Regions()) {
    EXPECT_EQ(region.num_chunks, 1u);
    EXPECT_EQ(region.num_free_chunks, 1u);
    EXPECT_EQ(region.largest_free_chunk, region.bytes);
  }
  EXPECT_EQ(allocator->stats().bytes_in_use, 0u);
}

TEST(GrowthAllocatorTest, LargeAllocationFitsOnlyAfterNeighboursCoalesce) {
  HostBacking backing(4 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/false);
  void *p[4];
  for (void *&q : p) q = MustAllocate(allocator.get(), kMiB);
  allocator->Free(p[1]);
  allocator->Free(p[2]);
  Result<void *> two = allocator->Allocate(2 * kMiB);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(*two, p[1]);
  for (void *q : {*two, p[0], p[3]}) allocator->Free(q);
}

TEST(GrowthAllocatorTest, FractionCapFailsWithANamedErrorAndKeepsLiveMemory) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true, /*fraction=*/0.25);
  auto *live = static_cast<unsigned char *>(MustAllocate(allocator.get(), 12 * kMiB));
  std::memset(live, 0xAB, 12 * kMiB);

  Result<void *> over = allocator->Allocate(8 * kMiB);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  const std::string &message = over.status().message();
  EXPECT_NE(message.find("out of GPU memory allocating 8.0 MiB on host memory"), std::string::npos)
      << message;
  EXPECT_NE(message.find("in use 12.0 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("of a 16.0 MiB limit (fraction 0.25 of 64.0 MiB)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("--gpu_memory_fraction"), std::string::npos) << message;
  EXPECT_LE(backing.bytes_reserved(), 16 * kMiB);

  for (size_t i = 0; i < 12 * kMiB; ++i) ASSERT_EQ(live[i], 0xAB) << "byte " << i;
  Result<void *> rest = allocator->Allocate(2 * kMiB);  // what is left still serves
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  allocator->Free(*rest);
  allocator->Free(live);
}

TEST(GrowthAllocatorTest, StatsTrackInUsePeakAndLargest) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  void *a = MustAllocate(allocator.get(), 1000);  // rounds to 1024
  void *b = MustAllocate(allocator.get(), 3 * kMiB);
  EXPECT_EQ(allocator->stats().bytes_in_use, 1024 + 3 * kMiB);
  allocator->Free(b);
  void *c = MustAllocate(allocator.get(), kKiB);
  AllocatorStats stats = allocator->stats();
  EXPECT_EQ(stats.bytes_in_use, 2 * kKiB);
  EXPECT_EQ(stats.peak_bytes_in_use, 1024 + 3 * kMiB);
  EXPECT_EQ(stats.largest_alloc, 3 * kMiB);
  EXPECT_EQ(stats.num_allocs, 3u);
  const std::string debug = allocator->DebugString();
  EXPECT_NE(debug.find("in use 2.0 KiB (peak 3.0 MiB)"), std::string::npos) << debug;
  allocator->Free(a);
  allocator->Free(c);
  EXPECT_EQ(allocator->stats().bytes_in_use, 0u);
}

TEST(GrowthAllocatorTest, AllocationsAreAlignedAndRoundedTo256Bytes) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  std::vector<void *> ptrs;
  for (size_t bytes : {0, 1, 3, 255, 256, 257, 1000, 4097}) {
    void *p = MustAllocate(allocator.get(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    EXPECT_EQ(allocator->AllocatedSize(p), std::max<size_t>(256, (bytes + 255) / 256 * 256));
    ptrs.push_back(p);
  }
  for (void *p : ptrs) allocator->Free(p);
}

TEST(GrowthAllocatorTest, FractionOutsideZeroToOneIsRejected) {
  HostBacking backing(64 * kMiB);
  for (double fraction : {0.0, -0.5, 1.5}) {
    GrowthAllocatorOptions options;
    options.memory_fraction = fraction;
    auto allocator = GrowthAllocator::Create(&backing, options);
    EXPECT_EQ(allocator.status().code(), StatusCode::kInvalidArgument) << fraction;
    EXPECT_NE(allocator.status().message().find("memory_fraction must be in (0, 1]"),
              std::string::npos);
  }
}

TEST(GrowthAllocatorDeathTest, FreeingAnUnknownOrFreedPointerDies) {
  HostBacking backing(64 * kMiB);
  auto allocator = MakeAllocator(&backing, /*allow_growth=*/true);
  int not_ours = 0;
  EXPECT_DEATH(allocator->Free(&not_ours), "not a live allocation");
  void *p = MustAllocate(allocator.get(), kKiB);
  allocator->Free(p);
  EXPECT_DEATH(allocator->Free(p), "not a live allocation");
}

}  // namespace
}  // namespace pstrain
