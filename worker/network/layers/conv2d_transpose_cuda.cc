// Conv2DTranspose on the GPU, as the conv it is the input gradient of (conv_base.h: our output is
// its x, our input its y): forward is the conv's backward-data pass, the input gradient its
// forward pass, the weights' gradient its backward-filter pass with our output's gradient as x.
#include "worker/network/layers/conv2d_transpose.h"

namespace pstrain {
namespace worker {

Status Conv2DTranspose::GpuSupport() const { return Status::OK(); }

void Conv2DTranspose::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                                 const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  ConvolveYToX(p, in[0]->data(), out->data(), ctx);
  AddBias(p, out->data(), ctx);
}

void Conv2DTranspose::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                                  const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                                  const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  const float* dx = PaddedX(p, out_grad.data(), ctx);  // the padding's gradient is dropped: zeros
  WeightsGradient(p, dx, in[0]->data(), ctx);
  BiasGradient(p, out_grad.data(), ctx);
  if (in_grads[0]) ConvolveXToY(p, dx, in_grads[0]->data(), ctx);
}

}  // namespace worker
}  // namespace pstrain
