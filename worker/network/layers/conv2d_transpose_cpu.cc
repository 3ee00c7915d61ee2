// Conv2DTranspose on the CPU: oneDNN's deconvolution primitives, run by ConvBase
// (conv_base_cpu.cc). oneDNN's deconvolution weights are {filters, in_channels, kh, kw}; ours
// [in_channels, filters, kh, kw] is its `iohw` tag.
#include "worker/network/layers/conv2d_transpose.h"
#include "worker/network/layers/conv_base_cpu.h"

namespace pstrain {
namespace worker {

void Conv2DTranspose::MakeCpuPrimitives(bool need_input_grad, CpuPlan* plan) const {
  MakeDnnlPrimitives<dnnl::deconvolution_forward, dnnl::deconvolution_backward_weights,
                     dnnl::deconvolution_backward_data>(dnnl::algorithm::deconvolution_direct,
                                                        need_input_grad, plan);
}

}  // namespace worker
}  // namespace pstrain
