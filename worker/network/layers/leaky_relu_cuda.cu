// LeakyRelu on the GPU: our elementwise kernels on the compute stream, as the CPU layer computes
// (the gradient from the input).
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/leaky_relu.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

__global__ void LeakyReluForwardKernel(const float* x, float alpha, float* y, int64_t n) {
  PSTRAIN_FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
}

__global__ void LeakyReluBackwardKernel(const float* x, const float* dy, float alpha, float* dx,
                                        int64_t n) {
  PSTRAIN_FOR_EACH(i, n) dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i];
}

}  // namespace
}  // namespace cuda

Status LeakyRelu::GpuSupport() const { return Status::OK(); }

void LeakyRelu::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                           const LayerContext& ctx) {
  const int64_t n = out->size();
  cuda::LeakyReluForwardKernel<<<cuda::Blocks(n), cuda::kThreads, 0, ctx.gpu->stream()>>>(
      in[0]->data(), alpha_, out->data(), n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

void LeakyRelu::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor&,
                            const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                            const LayerContext& ctx) {
  if (!in_grads[0]) return;
  const int64_t n = out_grad.size();
  cuda::LeakyReluBackwardKernel<<<cuda::Blocks(n), cuda::kThreads, 0, ctx.gpu->stream()>>>(
      in[0]->data(), out_grad.data(), alpha_, in_grads[0]->data(), n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace worker
}  // namespace pstrain
