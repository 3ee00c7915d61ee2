// Dropout on the GPU: the mask from a counter-based hash (the CPU's keep rule), applied by our
// kernel; a device-to-device copy in evaluation.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/dropout.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

// SplitMix64's finaliser: every bit of the counter affects every output bit.
__device__ uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__global__ void DropoutMaskKernel(uint64_t seed, uint32_t threshold, uint8_t* mask, int64_t n) {
  PSTRAIN_FOR_EACH(i, n) {
    const uint64_t bits = Mix(seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL);
    mask[i] = (bits & 0xffff) < threshold;
  }
}

__global__ void ApplyMaskKernel(const float* x, const uint8_t* mask, float scale, float* y,
                                int64_t n) {
  PSTRAIN_FOR_EACH(i, n) y[i] = mask[i] ? x[i] * scale : 0.0f;
}

// mask[i] = (16 bits of a hash of (seed, i)) < threshold: the CPU layer's rule (keep when a
// 16-bit draw is below keep_prob * 65536) with a counter-based generator instead of mt19937.
void DropoutMask(uint64_t seed, uint32_t threshold, uint8_t* mask, int64_t n, cudaStream_t s) {
  DropoutMaskKernel<<<Blocks(n), kThreads, 0, s>>>(seed, threshold, mask, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

// y = mask ? x * scale : 0
// Every row of y [rows, cols] = row [cols] (the dense layer's bias before the GEMM adds to it).
void ApplyMask(const float* x, const uint8_t* mask, float scale, float* y, int64_t n,
               cudaStream_t s) {
  ApplyMaskKernel<<<Blocks(n), kThreads, 0, s>>>(x, mask, scale, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace cuda

struct Dropout::GpuPlan {
  int64_t size = 0;
  cuda::DeviceBuffer mask;  // uint8, one per value
};

Status Dropout::GpuSupport() const { return Status::OK(); }

void Dropout::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                         const LayerContext& ctx) {
  const int64_t n = out->size();
  mask_valid_ = ctx.training && keep_prob_ < 1.0f;
  if (!mask_valid_) {
    cuda::Copy(in[0]->data(), out->data(), out->size(), ctx.gpu->stream());
    return;
  }
  CHECK(ctx.rng != nullptr) << Describe() << ": training needs a random generator";
  if (!gpu_plan_ || gpu_plan_->size < n) {
    auto p = std::make_shared<GpuPlan>();
    p->size = n;
    p->mask = ctx.gpu->AllocateOrDie(static_cast<size_t>(n), Describe() + " mask");
    gpu_plan_ = p;
  }
  // The same rule as the CPU (a 16-bit draw below keep_prob * 65536); one draw of the model's
  // generator seeds a counter-based hash, so runs with the same seed repeat.
  const uint32_t threshold = static_cast<uint32_t>(keep_prob_ * 65536.0f + 0.5f);
  const uint64_t seed = (*ctx.rng)();
  uint8_t* mask = gpu_plan_->mask.as<uint8_t>();
  cuda::DropoutMask(seed, threshold, mask, n, ctx.gpu->stream());
  cuda::ApplyMask(in[0]->data(), mask, 1.0f / keep_prob_, out->data(), n, ctx.gpu->stream());
}

void Dropout::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                          const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  if (!in_grads[0]) return;
  if (!mask_valid_) {
    cuda::Copy(out_grad.data(), in_grads[0]->data(), in_grads[0]->size(), ctx.gpu->stream());
    return;
  }
  cuda::ApplyMask(out_grad.data(), gpu_plan_->mask.as<uint8_t>(), 1.0f / keep_prob_,
                  in_grads[0]->data(), out_grad.size(), ctx.gpu->stream());
}

}  // namespace worker
}  // namespace pstrain
