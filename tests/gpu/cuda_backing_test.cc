#include "worker/memory/cuda_backing.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "worker/memory/growth_allocator.h"

namespace pstrain {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(CudaBackingTest, GrowthAllocatorServesDeviceMemory) {
  Result<int> count = CudaBacking::VisibleDeviceCount();
  if (!count.ok()) GTEST_SKIP() << "no GPU visible: " << count.status().message();
  if (*count == 0) GTEST_SKIP() << "no GPU visible: cudaGetDeviceCount returned 0";

  auto backing = CudaBacking::Create(0);
  ASSERT_TRUE(backing.ok()) << backing.status().ToString();
  EXPECT_GT((*backing)->total_memory(), 0u);

  GrowthAllocatorOptions options;
  options.memory_fraction = 0.05;
  auto allocator = GrowthAllocator::Create(backing->get(), options);
  ASSERT_TRUE(allocator.ok()) << allocator.status().ToString();

  std::vector<void *> ptrs;
  for (size_t bytes : {1 * kMiB, 3 * kMiB, 7 * kMiB + 5}) {
    Result<void *> ptr = (*allocator)->Allocate(bytes);
    ASSERT_TRUE(ptr.ok()) << ptr.status().ToString();
    ASSERT_EQ(cudaMemset(*ptr, 0x5A, bytes), cudaSuccess);
    std::vector<unsigned char> host(bytes);
    ASSERT_EQ(cudaMemcpy(host.data(), *ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(host.front(), 0x5A);
    EXPECT_EQ(host.back(), 0x5A);
    ptrs.push_back(*ptr);
  }
  EXPECT_GT((*allocator)->stats().num_regions, 1u);
  for (void *p : ptrs) (*allocator)->Free(p);
  EXPECT_EQ((*allocator)->stats().bytes_in_use, 0u);

  Result<void *> too_big = (*allocator)->Allocate((*backing)->total_memory());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("on cuda:0"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
