// Flatten on the GPU: device-to-device copies on the compute stream.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/layers/flatten.h"

namespace pstrain {
namespace worker {

Status Flatten::GpuSupport() const { return Status::OK(); }

void Flatten::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                         const LayerContext& ctx) {
  cuda::Copy(in[0]->data(), out->data(), out->size(), ctx.gpu->stream());
}

void Flatten::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                          const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  if (in_grads[0])
    cuda::Copy(out_grad.data(), in_grads[0]->data(), in_grads[0]->size(), ctx.gpu->stream());
}

}  // namespace worker
}  // namespace pstrain
