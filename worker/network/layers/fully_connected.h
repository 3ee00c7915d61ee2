// Fully connected layer: y = x W^T + b with W [units, features] (PyTorch's layout, so exported
// weights load into torch.nn.Linear unchanged). Expects a flat input: put a flatten before it.
#pragma once

#include "worker/network/layer.h"
#include "worker/network/layers/init.h"

namespace pstrain {
namespace worker {

class FullyConnected : public Layer {
 public:
  explicit FullyConnected(const std::string& name) : Layer(name, "fully_connected") {}
  Status Configure(const ConfigNode& node) override;
  Result<GraphOp> TensorFlowOp() const override;
  Result<GraphOp> OnnxOp() const override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()

 private:
  int64_t units_ = 0, features_ = 0;
  bool use_bias_ = true;
  Init init_ = Init::kGlorotUniform;
  Tensor weights_, weights_grad_, bias_, bias_grad_;
};

}  // namespace worker
}  // namespace pstrain
