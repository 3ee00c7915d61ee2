// Flatten: [C, H, W] to [C*H*W] per example (a copy; the order is unchanged).
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Flatten : public Layer {
 public:
  explicit Flatten(const std::string& name) : Layer(name, "flatten") {}
  Status Configure(const ConfigNode& node) override;
  Result<GraphOp> TensorFlowOp() const override;
  Result<GraphOp> OnnxOp() const override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override {
    return Shape{inputs[0].num_elements()};
  }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()
};

}  // namespace worker
}  // namespace pstrain
