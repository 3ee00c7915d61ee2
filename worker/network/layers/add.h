// Add: the elementwise sum of two inputs of the same shape (residual connections).
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

// Elementwise sum of two inputs of the same shape (residual connections).
class Add : public Layer {
 public:
  explicit Add(const std::string& name) : Layer(name, "add") {}
  Status Configure(const ConfigNode& node) override;
  Result<GraphOp> TensorFlowOp() const override;
  Result<GraphOp> OnnxOp() const override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  int num_inputs() const override { return 2; }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()
};

}  // namespace worker
}  // namespace pstrain
