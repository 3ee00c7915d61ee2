// 2-D convolution over NCHW inputs, weights [filters, in_channels, kh, kw], optional bias: the
// conv of conv_base.h itself.
#pragma once

#include <string>

#include "worker/network/layers/conv_base.h"

namespace pstrain {
namespace worker {

class Conv2D : public ConvBase {
 public:
  Conv2D() : ConvBase(/*transposed=*/false) {}
  Status Configure(const ConfigNode& node) override { return ConfigureConv(node, {}); }
  Result<GraphOp> TensorFlowOp() const override;
  Result<GraphOp> OnnxOp() const override;

 protected:
  Result<Window1D> OutputWindow(int dim, int64_t in, int64_t kernel, int64_t stride,
                                int64_t* out) const override;
  void MakeCpuPrimitives(bool need_input_grad, CpuPlan* plan) const override;
  PSTRAIN_DECLARE_GPU_KERNELS()
};

}  // namespace worker
}  // namespace pstrain
