// Embedding on the GPU: one thread per output element forward; backward one thread per (slot,
// element), added into the row with atomics (the order of the sum differs from the CPU's by
// rounding only).
#include <cuda_runtime.h>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/embedding.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

// Slots of example e that name a row; indices arrive as floats (embedding.h).
__device__ int64_t UsedSlots(const float* slots, int64_t e, int64_t l) {
  int64_t used = 0;
  for (int64_t s = 0; s < l; ++s) used += lroundf(slots[e * l + s]) >= 0;
  return used;
}

__global__ void EmbeddingForwardKernel(const float* slots, const float* rows, int64_t n, int64_t l,
                                       int64_t d, bool mean, float* y) {
  PSTRAIN_FOR_EACH(i, n * d) {
    const int64_t e = i / d, k = i % d;
    float sum = 0.0f;
    for (int64_t s = 0; s < l; ++s) {
      const int64_t r = lroundf(slots[e * l + s]);
      if (r >= 0) sum += rows[r * d + k];
    }
    const int64_t used = UsedSlots(slots, e, l);
    y[i] = mean && used > 1 ? sum / static_cast<float>(used) : sum;
  }
}

__global__ void EmbeddingBackwardKernel(const float* slots, const float* dy, int64_t n, int64_t l,
                                        int64_t d, bool mean, float* grad) {
  PSTRAIN_FOR_EACH(i, n * l * d) {
    const int64_t k = i % d, slot = i / d, e = slot / l;
    const int64_t r = lroundf(slots[slot]);
    if (r < 0) continue;
    const int64_t used = UsedSlots(slots, e, l);
    const float scale = mean && used > 1 ? 1.0f / static_cast<float>(used) : 1.0f;
    atomicAdd(grad + r * d + k, scale * dy[e * d + k]);
  }
}

}  // namespace
}  // namespace cuda

Status Embedding::GpuSupport() const { return Status::OK(); }

void Embedding::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                           const LayerContext& ctx) {
  const int64_t n = out->dim(0), total = out->size();
  cuda::EmbeddingForwardKernel<<<cuda::Blocks(total), cuda::kThreads, 0, ctx.gpu->stream()>>>(
      in[0]->data(), variables()[0].device_value.data(), n, slots_, dimension_,
      combiner_ == Combiner::kMean, out->data());
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

void Embedding::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor&,
                            const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                            const LayerContext& ctx) {
  if (in_grads[0]) cuda::Fill(in_grads[0]->data(), in_grads[0]->size(), 0.0f, ctx.gpu->stream());
  Tensor& grad = variables()[0].device_grad;
  cuda::Fill(grad.data(), grad.size(), 0.0f, ctx.gpu->stream());
  const int64_t n = out_grad.dim(0), total = n * slots_ * dimension_;
  cuda::EmbeddingBackwardKernel<<<cuda::Blocks(total), cuda::kThreads, 0, ctx.gpu->stream()>>>(
      in[0]->data(), out_grad.data(), n, slots_, dimension_, combiner_ == Combiner::kMean,
      grad.data());
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace worker
}  // namespace pstrain
