// ReLU on the GPU: our element-wise kernels (cuda/elementwise.cuh) on the compute stream.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/elementwise.cuh"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/layers/relu.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

struct ReluOp {
  __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
// dx = y > 0 ? dy : 0, as the CPU layer (from the output).
struct ReluGradOp {
  __device__ float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};

void ReluForward(const float* x, float* y, int64_t n, cudaStream_t s) {
  Unary(x, y, n, ReluOp{}, s);
}

void ReluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  Binary(y, dy, dx, n, ReluGradOp{}, s);
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
