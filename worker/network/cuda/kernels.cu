// Kernels more than one layer (or the model) uses: fills, sums, broadcasts, padding.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/elementwise.cuh"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"

namespace pstrain {
namespace worker {
namespace cuda {
namespace {

__global__ void FillKernel(float* x, int64_t n, float v) { PSTRAIN_FOR_EACH(i, n) x[i] = v; }
// A 32-bit integer hash (Wellons' lowbias32) of the index and seed, as a float in [-1, 1).
__global__ void FillNoiseKernel(float* x, int64_t n, uint32_t seed) {
  PSTRAIN_FOR_EACH(i, n) {
    uint32_t h = static_cast<uint32_t>(i) ^ (static_cast<uint32_t>(i >> 32) * 0x9E3779B9u) ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    x[i] = static_cast<float>(h) * (2.0f / 4294967296.0f) - 1.0f;
  }
}
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
__global__ void BroadcastRowsKernel(const float* row, int64_t rows, int64_t cols, float* y) {
  PSTRAIN_FOR_EACH(i, rows * cols) y[i] = row[i % cols];
}
// Index type I: 32-bit where the sizes allow (64-bit division costs several times more).
template <typename I>
__global__ void PadKernel(const float* x, PaddedPlanes p, float border, float* y) {
  const I w = static_cast<I>(p.w), h = static_cast<I>(p.h);
  const I pw = static_cast<I>(p.padded_w), ph = static_cast<I>(p.padded_h);
  const I top = static_cast<I>(p.top), left = static_cast<I>(p.left);
  const I count = static_cast<I>(p.planes) * ph * pw;
  PSTRAIN_FOR_EACH_AS(I, e, count) {
    const I c = e % pw, rest = e / pw, r = rest % ph, plane = rest / ph;
    const I ih = r - top, iw = c - left;
    y[e] = ih >= 0 && ih < h && iw >= 0 && iw < w ? x[(plane * h + ih) * w + iw] : border;
  }
}
template <typename I>
__global__ void CropKernel(const float* y, PaddedPlanes p, float* x) {
  const I w = static_cast<I>(p.w), h = static_cast<I>(p.h);
  const I pw = static_cast<I>(p.padded_w), ph = static_cast<I>(p.padded_h);
  const I count = static_cast<I>(p.planes) * h * w;
  PSTRAIN_FOR_EACH_AS(I, e, count) {
    const I iw = e % w, rest = e / w, ih = rest % h, plane = rest / h;
    x[e] = y[(plane * ph + ih + static_cast<I>(p.top)) * pw + iw + static_cast<I>(p.left)];
  }
}

}  // namespace

void Fill(float* x, int64_t n, float value, cudaStream_t s) {
  FillKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, value);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void FillNoise(float* x, int64_t n, uint32_t seed, cudaStream_t s) {
  if (n <= 0) return;
  FillNoiseKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, seed);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Copy(const float* from, float* to, int64_t n, cudaStream_t s) {
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}
void Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  Binary(a, b, y, n, Sum{}, s);
}
void AddInPlace(const float* x, float* y, int64_t n, cudaStream_t s) {
  Binary(x, y, y, n, Sum{}, s);
}
void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y, cudaStream_t s) {
  BroadcastRowsKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(row, rows, cols, y);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Pad(const float* x, const PaddedPlanes& p, float border, float* y, cudaStream_t s) {
  const int64_t n = p.planes * p.padded_h * p.padded_w;
  if (Fits32(n)) {
    PadKernel<int32_t><<<Blocks(n), kThreads, 0, s>>>(x, p, border, y);
  } else {
    PadKernel<int64_t><<<Blocks(n), kThreads, 0, s>>>(x, p, border, y);
  }
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Crop(const float* y, const PaddedPlanes& p, float* x, cudaStream_t s) {
  const int64_t n = p.planes * p.h * p.w;
  if (Fits32(n)) {
    CropKernel<int32_t><<<Blocks(n), kThreads, 0, s>>>(y, p, x);
  } else {
    CropKernel<int64_t><<<Blocks(n), kThreads, 0, s>>>(y, p, x);
  }
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
