// Conv2D on the CPU: oneDNN's convolution primitives, run by ConvBase (conv_base_cpu.cc).
#include "worker/network/layers/conv2d.h"
#include "worker/network/layers/conv_base_cpu.h"

namespace pstrain {
namespace worker {

void Conv2D::MakeCpuPrimitives(bool need_input_grad, CpuPlan* plan) const {
  MakeDnnlPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_weights,
                     dnnl::convolution_backward_data>(dnnl::algorithm::convolution_direct,
                                                      need_input_grad, plan);
}

}  // namespace worker
}  // namespace pstrain
