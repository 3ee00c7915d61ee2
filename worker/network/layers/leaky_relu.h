// Leaky ReLU: x for x > 0, alpha * x otherwise, elementwise; TensorFlow's tf.nn.leaky_relu (alpha
// 0.2 by default, as there) and ONNX's LeakyRelu.
#pragma once

#include <string>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class LeakyRelu : public Layer {
 public:
  explicit LeakyRelu(const std::string& name) : Layer(name, "leaky_relu") {}
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

 private:
  float alpha_ = 0.2f;
};

}  // namespace worker
}  // namespace pstrain
