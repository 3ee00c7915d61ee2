// Kernels more than one layer (or the model) uses: fills, sums, broadcasts, padding.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"

namespace pstrain {
namespace worker {
namespace cuda {
namespace {

__global__ void FillKernel(float* x, int64_t n, float v) { PSTRAIN_FOR_EACH(i, n) x[i] = v; }
__global__ void AddKernel(const float* a, const float* b, float* y, int64_t n) {
  PSTRAIN_FOR_EACH(i, n) y[i] = a[i] + b[i];
}
__global__ void AddInPlaceKernel(const float* x, float* y, int64_t n) {
  PSTRAIN_FOR_EACH(i, n) y[i] += x[i];
}
__global__ void BroadcastRowsKernel(const float* row, int64_t rows, int64_t cols, float* y) {
  PSTRAIN_FOR_EACH(i, rows * cols) y[i] = row[i % cols];
}
__global__ void PadKernel(const float* x, PaddedPlanes p, float border, float* y) {
  PSTRAIN_FOR_EACH(e, p.planes * p.padded_h * p.padded_w) {
    const int64_t c = e % p.padded_w, r = (e / p.padded_w) % p.padded_h;
    const int64_t plane = e / (p.padded_w * p.padded_h);
    const int64_t ih = r - p.top, iw = c - p.left;
    y[e] = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w ? x[(plane * p.h + ih) * p.w + iw] : border;
  }
}
__global__ void CropKernel(const float* y, PaddedPlanes p, float* x) {
  PSTRAIN_FOR_EACH(e, p.planes * p.h * p.w) {
    const int64_t iw = e % p.w, ih = (e / p.w) % p.h, plane = e / (p.w * p.h);
    x[e] = y[(plane * p.padded_h + ih + p.top) * p.padded_w + iw + p.left];
  }
}

}  // namespace

void Fill(float* x, int64_t n, float value, cudaStream_t s) {
  FillKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, value);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Copy(const float* from, float* to, int64_t n, cudaStream_t s) {
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}
void Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  AddKernel<<<Blocks(n), kThreads, 0, s>>>(a, b, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void AddInPlace(const float* x, float* y, int64_t n, cudaStream_t s) {
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y, cudaStream_t s) {
  BroadcastRowsKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(row, rows, cols, y);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Pad(const float* x, const PaddedPlanes& p, float border, float* y, cudaStream_t s) {
  PadKernel<<<Blocks(p.planes * p.padded_h * p.padded_w), kThreads, 0, s>>>(x, p, border, y);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Crop(const float* y, const PaddedPlanes& p, float* x, cudaStream_t s) {
  CropKernel<<<Blocks(p.planes * p.h * p.w), kThreads, 0, s>>>(y, p, x);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
