// Our own CUDA kernels, for what cuDNN and cuBLAS do not do (or not with TensorFlow's padding):
// elementwise ops, dropout masks, softmax cross-entropy with integer labels, explicit padding
// for asymmetric SAME windows, pooling with asymmetric padding and batch norm's backward pass
// with moving statistics. All run on the given stream; sizes are element counts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pstrain {
namespace worker {
namespace cuda {

void Fill(float* x, int64_t n, float value, cudaStream_t stream);
// y = a + b
void Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// y += x
void AddInPlace(const float* x, float* y, int64_t n, cudaStream_t stream);
void ReluForward(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = y > 0 ? dy : 0, as the CPU layer (from the output).
void ReluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);

// mask[i] = (16 bits of a hash of (seed, i)) < threshold: the CPU layer's rule (keep when a
// 16-bit draw is below keep_prob * 65536) with a counter-based generator instead of mt19937.
void DropoutMask(uint64_t seed, uint32_t threshold, uint8_t* mask, int64_t n, cudaStream_t stream);
// y = mask ? x * scale : 0
void ApplyMask(const float* x, const uint8_t* mask, float scale, float* y, int64_t n,
               cudaStream_t stream);

// Every row of y [rows, cols] = row [cols] (the dense layer's bias before the GEMM adds to it).
void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y, cudaStream_t stream);

// Per example: probs = softmax(z), loss = -log probs[label]. Labels must be in [0, k).
void SoftmaxCrossEntropyForward(const float* z, const int32_t* labels, int64_t n, int64_t k,
                                float* probs, float* loss, cudaStream_t stream);
// dz = dloss[i] * (probs - onehot(label))
void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, const float* dloss,
                                 int64_t n, int64_t k, float* dz, cudaStream_t stream);

// Planes [planes, h, w] and the same planes inside a border: [planes, h + top + bottom,
// w + left + right].
struct PaddedPlanes {
  int64_t planes, h, w, top, left, padded_h, padded_w;
};
// Writes x into the interior of y and `border` around it.
void Pad(const float* x, const PaddedPlanes& p, float border, float* y, cudaStream_t stream);
// x = the interior of y (the gradient of Pad).
void Crop(const float* y, const PaddedPlanes& p, float* x, cudaStream_t stream);

// Pooling over planes [planes, h, w] with TensorFlow's windows (pad_top/pad_left before, the
// rest after); average pooling divides by the real pixels in each window, max pooling routes
// the gradient to the first maximum of each window.
struct PoolGeometry {
  int64_t planes, h, w, out_h, out_w, kh, kw, sh, sw, pad_top, pad_left;
  bool max;
};
void PoolForward(const float* x, const PoolGeometry& g, float* y, cudaStream_t stream);
void PoolBackward(const float* x, const float* dy, const PoolGeometry& g, float* dx,
                  cudaStream_t stream);

// Batch norm's backward pass when the forward pass normalised with the moving statistics
// (constants): dgamma = sum(dy * xhat), dbeta = sum(dy), dx = dy * gamma / sqrt(var + eps).
// x and dy are [n, channels, spatial]; dx may be null.
void BatchNormBackwardWithMovingStats(const float* x, const float* dy, const float* gamma,
                                      const float* mean, const float* var, float epsilon, int64_t n,
                                      int64_t channels, int64_t spatial, float* dx, float* dgamma,
                                      float* dbeta, cudaStream_t stream);

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
