// The CUDA kernels more than one layer (or the model) uses: fills, sums, copies, broadcasts and
// explicit padding for TensorFlow's asymmetric SAME windows. A layer's own kernels live in its
// layers/<name>_cuda.cu (relu, dropout, pooling, batch norm, the loss). All run on the given
// stream; sizes are element counts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pstrain {
namespace worker {
namespace cuda {

void Fill(float* x, int64_t n, float value, cudaStream_t stream);

// x[i] = a hash of (i, seed) in [-1, 1): data to time kernels on (some run faster on zeros).
void FillNoise(float* x, int64_t n, uint32_t seed, cudaStream_t stream);

// to = from, device to device.
void Copy(const float* from, float* to, int64_t n, cudaStream_t stream);

// y = a + b
void Add(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);

// y += x
void AddInPlace(const float* x, float* y, int64_t n, cudaStream_t stream);

// Every row of y [rows, cols] = row [cols] (the dense layer's bias before the GEMM adds to it).
void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* y, cudaStream_t stream);

// Planes [planes, h, w] and the same planes inside a border: [planes, h + top + bottom,
// w + left + right].
struct PaddedPlanes {
  int64_t planes, h, w, top, left, padded_h, padded_w;
};

// Writes x into the interior of y and `border` around it.
void Pad(const float* x, const PaddedPlanes& p, float border, float* y, cudaStream_t stream);

// x = the interior of y (the gradient of Pad).
void Crop(const float* y, const PaddedPlanes& p, float* x, cudaStream_t stream);

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
