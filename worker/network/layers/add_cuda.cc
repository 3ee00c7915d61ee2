// Add on the GPU: our elementwise kernel forward, device-to-device copies backward.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/layers/add.h"

namespace pstrain {
namespace worker {

Status Add::GpuSupport() const { return Status::OK(); }

void Add::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) {
  cuda::Add(in[0]->data(), in[1]->data(), out->data(), out->size(), ctx.gpu->stream());
}

void Add::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                      const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  for (Tensor* g : in_grads) {
    if (g) cuda::Copy(out_grad.data(), g->data(), g->size(), ctx.gpu->stream());
  }
}

}  // namespace worker
}  // namespace pstrain
