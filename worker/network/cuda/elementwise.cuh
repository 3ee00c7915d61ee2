// Element-wise kernels four floats at a time: 16-byte loads and stores, 32-bit indices within
// each launch's quarter, a scalar tail. An H200 ran our scalar grid-stride ReLU at half
// PyTorch's vectorised rate (ResNet-50: 2.2 vs 1.2 ms forward, 5.2 vs 1.7 ms backward per step).
// For .cu files only.
#pragma once

#include <cstdint>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/launch.cuh"

namespace pstrain {
namespace worker {
namespace cuda {

inline bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename Op>
__device__ inline float4 Apply4(const Op& op, float4 a, float4 b) {
  return make_float4(op(a.x, b.x), op(a.y, b.y), op(a.z, b.z), op(a.w, b.w));
}

// y[i] = op(a[i], b[i]) for i < n; `vectors` = n / 4 when every buffer is 16-byte aligned, else
// 0 (all scalar). y may be a or b.
template <typename Op>
__global__ void BinaryKernel(const float* a, const float* b, float* y, int64_t n, int64_t vectors,
                             Op op) {
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int64_t i = first; i < vectors; i += stride) y4[i] = Apply4(op, a4[i], b4[i]);
  for (int64_t i = vectors * 4 + first; i < n; i += stride) y[i] = op(a[i], b[i]);
}

// The launch of BinaryKernel over n elements on stream s.
template <typename Op>
void Binary(const float* a, const float* b, float* y, int64_t n, Op op, cudaStream_t s) {
  if (n <= 0) return;
  const bool aligned = Aligned16(a) && Aligned16(b) && Aligned16(y);
  const int64_t vectors = aligned ? n / 4 : 0;
  const int64_t threads_needed = vectors > 0 ? vectors : n;
  BinaryKernel<<<Blocks(threads_needed), kThreads, 0, s>>>(a, b, y, n, vectors, op);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

// y[i] = op(x[i]), as BinaryKernel with one operand.
template <typename Op>
__global__ void UnaryKernel(const float* x, float* y, int64_t n, int64_t vectors, Op op) {
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int64_t i = first; i < vectors; i += stride) {
    const float4 v = x4[i];
    y4[i] = make_float4(op(v.x), op(v.y), op(v.z), op(v.w));
  }
  for (int64_t i = vectors * 4 + first; i < n; i += stride) y[i] = op(x[i]);
}

template <typename Op>
void Unary(const float* x, float* y, int64_t n, Op op, cudaStream_t s) {
  if (n <= 0) return;
  const int64_t vectors = Aligned16(x) && Aligned16(y) ? n / 4 : 0;
  UnaryKernel<<<Blocks(vectors > 0 ? vectors : n), kThreads, 0, s>>>(x, y, n, vectors, op);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
