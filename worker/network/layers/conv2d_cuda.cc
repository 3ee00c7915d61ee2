// Conv2D on the GPU: the conv of conv_base.h itself (our input is its x, our output its y), with
// cuDNN through ConvBase's passes (conv_base_cuda.cc).
#include "worker/network/layers/conv2d.h"

namespace pstrain {
namespace worker {

Status Conv2D::GpuSupport() const { return Status::OK(); }

void Conv2D::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                        const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  ConvolveXToY(p, PaddedX(p, in[0]->data(), ctx), out->data(), ctx);
  AddBias(p, out->data(), ctx);
}

void Conv2D::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                         const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                         const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  // Padded again: another forward pass (evaluation) may have overwritten the buffer.
  WeightsGradient(p, PaddedX(p, in[0]->data(), ctx), out_grad.data(), ctx);
  BiasGradient(p, out_grad.data(), ctx);
  if (in_grads[0]) ConvolveYToX(p, out_grad.data(), in_grads[0]->data(), ctx);
}

}  // namespace worker
}  // namespace pstrain
