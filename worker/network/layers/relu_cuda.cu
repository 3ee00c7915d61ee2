// ReLU on the GPU: our elementwise kernels on the compute stream.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/relu.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

__global__ void ReluForwardKernel(const float* x, float* y, int64_t n) {
  PSTRAIN_FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void ReluBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  PSTRAIN_FOR_EACH(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void ReluForward(const float* x, float* y, int64_t n, cudaStream_t s) {
  ReluForwardKernel<<<Blocks(n), kThreads, 0, s>>>(x, y, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

// dx = y > 0 ? dy : 0, as the CPU layer (from the output).
void ReluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(y, dy, dx, n);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace cuda

Status Relu::GpuSupport() const { return Status::OK(); }

void Relu::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) {
  cuda::ReluForward(in[0]->data(), out->data(), out->size(), ctx.gpu->stream());
}

void Relu::BackwardGpu(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& out_grad,
                       const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  if (!in_grads[0]) return;
  cuda::ReluBackward(out.data(), out_grad.data(), in_grads[0]->data(), out.size(),
                     ctx.gpu->stream());
}

}  // namespace worker
}  // namespace pstrain
