#include <cfloat>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to fill the GPU; the kernels loop over the rest (grid-stride loops).
unsigned Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

#define FOR_EACH(i, n)                                                                   \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void FillKernel(float* x, int64_t n, float v) { FOR_EACH(i, n) x[i] = v; }
__global__ void AddKernel(const float* a, const float* b, float* y, int64_t n) {
  FOR_EACH(i, n) y[i] = a[i] + b[i];
}
__global__ void AddInPlaceKernel(const float* x, float* y, int64_t n) {
  FOR_EACH(i, n) y[i] += x[i];
}
__global__ void ReluForwardKernel(const float* x, float* y, int64_t n) {
  FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void ReluBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  FOR_EACH(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// SplitMix64's finaliser: every bit of the counter affects every output bit.
__device__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
__global__ void DropoutMaskKernel(uint64_t seed, uint32_t threshold, uint8_t* mask, int64_t n) {
  FOR_EACH(i, n) {
    const uint64_t bits = Mix(seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL);
    mask[i] = (bits & 0xffff) < threshold;
  }
}
__global__ void ApplyMaskKernel(const float* x, const uint8_t* mask, float scale, float* y,
                                int64_t n) {
  FOR_EACH(i, n) y[i] = mask[i] ? x[i] * scale : 0.0f;
}
__global__ void BroadcastRowsKernel(const float* row, int64_t rows, int64_t cols, float* y) {
  FOR_EACH(i, rows * cols) y[i] = row[i % cols];
}

__global__ void SoftmaxXentForwardKernel(const float* z, const int32_t* labels, int64_t n,
                                         int64_t k, float* probs, float* loss) {
  FOR_EACH(i, n) {
    const float* row = z + i * k;
    float mx = row[0];
    for (int64_t j = 1; j < k; ++j) mx = fmaxf(mx, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(row[j] - mx));
    const double log_sum = log(sum);
    for (int64_t j = 0; j < k; ++j) {
      probs[i * k + j] = static_cast<float>(exp(row[j] - mx - log_sum));
    }
    loss[i] = static_cast<float>(log_sum - (row[labels[i]] - mx));
  }
}
__global__ void SoftmaxXentBackwardKernel(const float* probs, const int32_t* labels,
                                          const float* dloss, int64_t n, int64_t k, float* dz) {
  FOR_EACH(e, n * k) {
    const int64_t i = e / k, j = e % k;
    dz[e] = dloss[i] * (probs[e] - (j == labels[i] ? 1.0f : 0.0f));
  }
}

__global__ void PadKernel(const float* x, PaddedPlanes p, float border, float* y) {
  FOR_EACH(e, p.planes * p.padded_h * p.padded_w) {
    const int64_t c = e % p.padded_w, r = (e / p.padded_w) % p.padded_h;
    const int64_t plane = e / (p.padded_w * p.padded_h);
    const int64_t ih = r - p.top, iw = c - p.left;
    y[e] = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w ? x[(plane * p.h + ih) * p.w + iw] : border;
  }
}
__global__ void CropKernel(const float* y, PaddedPlanes p, float* x) {
  FOR_EACH(e, p.planes * p.h * p.w) {
    const int64_t iw = e % p.w, ih = (e / p.w) % p.h, plane = e / (p.w * p.h);
    x[e] = y[(plane * p.padded_h + ih + p.top) * p.padded_w + iw + p.left];
  }
}

// The first maximum of output (oh, ow)'s window in row-major order, as a plane offset.
__device__ int64_t ArgMax(const float* plane, const PoolGeometry& g, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
  int64_t best = -1;
  float best_v = -FLT_MAX;
  for (int64_t ih = max(h0, int64_t{0}); ih < min(h0 + g.kh, g.h); ++ih) {
    for (int64_t iw = max(w0, int64_t{0}); iw < min(w0 + g.kw, g.w); ++iw) {
      const float v = plane[ih * g.w + iw];
      if (best < 0 || v > best_v) {
        best = ih * g.w + iw;
        best_v = v;
      }
    }
  }
  return best;
}
__device__ int64_t RealPixels(const PoolGeometry& g, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
  const int64_t rows = min(h0 + g.kh, g.h) - max(h0, int64_t{0});
  const int64_t cols = min(w0 + g.kw, g.w) - max(w0, int64_t{0});
  return rows * cols;
}
__global__ void PoolForwardKernel(const float* x, PoolGeometry g, float* y) {
  FOR_EACH(e, g.planes * g.out_h * g.out_w) {
    const int64_t ow = e % g.out_w, oh = (e / g.out_w) % g.out_h, plane = e / (g.out_w * g.out_h);
    const float* p = x + plane * g.h * g.w;
    if (g.max) {
      y[e] = p[ArgMax(p, g, oh, ow)];
      continue;
    }
    const int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
    float sum = 0.0f;
    for (int64_t ih = max(h0, int64_t{0}); ih < min(h0 + g.kh, g.h); ++ih) {
      for (int64_t iw = max(w0, int64_t{0}); iw < min(w0 + g.kw, g.w); ++iw)
        sum += p[ih * g.w + iw];
    }
    y[e] = sum / static_cast<float>(RealPixels(g, oh, ow));
  }
}
// One thread per input pixel gathers from the outputs whose windows hold it (no atomics).
__global__ void PoolBackwardKernel(const float* x, const float* dy, PoolGeometry g, float* dx) {
  FOR_EACH(e, g.planes * g.h * g.w) {
    const int64_t iw = e % g.w, ih = (e / g.w) % g.h, plane = e / (g.w * g.h);
    const float* p = x + plane * g.h * g.w;
    const float* d = dy + plane * g.out_h * g.out_w;
    // Outputs o with o * s - pad <= i < o * s - pad + k.
    const int64_t oh0 = max(int64_t{0}, (ih + g.pad_top - g.kh + g.sh) / g.sh);
    const int64_t oh1 = min(g.out_h - 1, (ih + g.pad_top) / g.sh);
    const int64_t ow0 = max(int64_t{0}, (iw + g.pad_left - g.kw + g.sw) / g.sw);
    const int64_t ow1 = min(g.out_w - 1, (iw + g.pad_left) / g.sw);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        if (g.max) {
          if (ArgMax(p, g, oh, ow) == ih * g.w + iw) sum += d[oh * g.out_w + ow];
        } else {
          sum += d[oh * g.out_w + ow] / static_cast<float>(RealPixels(g, oh, ow));
        }
      }
    }
    dx[e] = sum;
  }
}

// One block per channel: reduce, then write dx.
__global__ void BatchNormBackwardMovingKernel(const float* x, const float* dy, const float* gamma,
                                              const float* mean, const float* var, float epsilon,
                                              int64_t n, int64_t channels, int64_t spatial,
                                              float* dx, float* dgamma, float* dbeta) {
  const int64_t c = blockIdx.x;
  const float inv = rsqrtf(var[c] + epsilon), m = mean[c];
  const int64_t count = n * spatial;
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t idx = ((e / spatial) * channels + c) * spatial + e % spatial;
    s1 += dy[idx];
    s2 += dy[idx] * (x[idx] - m) * inv;
  }
  __shared__ float sh1[kThreads], sh2[kThreads];
  sh1[threadIdx.x] = s1;
  sh2[threadIdx.x] = s2;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sh1[threadIdx.x] += sh1[threadIdx.x + stride];
      sh2[threadIdx.x] += sh2[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    dbeta[c] = sh1[0];
    dgamma[c] = sh2[0];
  }
  if (!dx) return;
  const float scale = gamma[c] * inv;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t idx = ((e / spatial) * channels + c) * spatial + e % spatial;
    dx[idx] = scale * dy[idx];
  }
}

}  // namespace

void Fill(float* x, int64_t n, float value, cudaStream_t s) {
  FillKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, value);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  AddKernel<<<Blocks(n), kThreads, 0, s>>>(a, b, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void AddInPlace(const float* x, float* y, int64_t n, cudaStream_t s) {
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void ReluForward(const float* x, float* y, int64_t n, cudaStream_t s) {
  ReluForwardKernel<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void ReluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(y, dy, dx, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void DropoutMask(uint64_t seed, uint32_t threshold, uint8_t* mask, int64_t n, cudaStream_t s) {
  DropoutMaskKernel<<<Blocks(n), kThreads, 0, s>>>(seed, threshold, mask, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void ApplyMask(const float* x, const uint8_t* mask, float scale, float* y, int64_t n,
               cudaStream_t s) {
  ApplyMaskKernel<<<Blocks(n), kThreads, 0, s>>>(x, mask, scale, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y, cudaStream_t s) {
  BroadcastRowsKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(row, rows, cols, y);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void SoftmaxCrossEntropyForward(const float* z, const int32_t* labels, int64_t n, int64_t k,
                                float* probs, float* loss, cudaStream_t s) {
  SoftmaxXentForwardKernel<<<Blocks(n), kThreads, 0, s>>>(z, labels, n, k, probs, loss);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, const float* dloss,
                                 int64_t n, int64_t k, float* dz, cudaStream_t s) {
  SoftmaxXentBackwardKernel<<<Blocks(n * k), kThreads, 0, s>>>(probs, labels, dloss, n, k, dz);
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
void PoolForward(const float* x, const PoolGeometry& g, float* y, cudaStream_t s) {
  PoolForwardKernel<<<Blocks(g.planes * g.out_h * g.out_w), kThreads, 0, s>>>(x, g, y);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void PoolBackward(const float* x, const float* dy, const PoolGeometry& g, float* dx,
                  cudaStream_t s) {
  PoolBackwardKernel<<<Blocks(g.planes * g.h * g.w), kThreads, 0, s>>>(x, dy, g, dx);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void BatchNormBackwardWithMovingStats(const float* x, const float* dy, const float* gamma,
                                      const float* mean, const float* var, float epsilon, int64_t n,
                                      int64_t channels, int64_t spatial, float* dx, float* dgamma,
                                      float* dbeta, cudaStream_t s) {
  BatchNormBackwardMovingKernel<<<static_cast<unsigned>(channels), kThreads, 0, s>>>(
      x, dy, gamma, mean, var, epsilon, n, channels, spatial, dx, dgamma, dbeta);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
