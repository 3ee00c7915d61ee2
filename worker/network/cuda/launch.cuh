// What every file of CUDA kernels shares: the block size and grid-stride loops.
#pragma once

#include <cstdint>

namespace pstrain {
namespace worker {
namespace cuda {

constexpr int kThreads = 256;

// Enough blocks to fill the GPU; the kernels loop over the rest (grid-stride loops).
inline unsigned Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

// Whether 32-bit indices cover `elements` and a grid-stride loop's last step past them (kernels
// templated on their index type take int32_t then: 64-bit division costs several times more).
inline bool Fits32(int64_t elements) {
  return elements + int64_t{65535} * kThreads < (int64_t{1} << 31);
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain

#define PSTRAIN_FOR_EACH(i, n)                                                           \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// The same loop with indices of type I (int32_t where Fits32 says so).
#define PSTRAIN_FOR_EACH_AS(I, i, n)                                         \
  for (I i = static_cast<I>(blockIdx.x * blockDim.x + threadIdx.x); i < (n); \
       i += static_cast<I>(blockDim.x * gridDim.x))
