// ReLU: max(x, 0), elementwise.
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Relu : public Layer {
 public:
  explicit Relu(const std::string& name) : Layer(name, "relu") {}
  Status Configure(const ConfigNode& node) override;
  Result<GraphOp> TensorFlowOp() const override;
  Result<GraphOp> OnnxOp() const override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override { return inputs[0]; }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()
};

}  // namespace worker
}  // namespace pstrain
