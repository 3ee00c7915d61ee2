// Fully connected layer: y = x W^T + b with W [units, features] (PyTorch's layout, so exported
// weights load into torch.nn.Linear unchanged). Expects a flat input: put a flatten before it.
#pragma once

#include "worker/network/layer.h"
#include "worker/network/layers/init.h"

namespace pstrain {
namespace worker {

class FullyConnected : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

  PSTRAIN_DECLARE_LAYER()

 private:
  int64_t units_ = 0, features_ = 0;
  bool use_bias_ = true;
  Init init_ = Init::kGlorotUniform;
  Tensor weights_, weights_grad_, bias_, bias_grad_;
};

}  // namespace worker
}  // namespace pstrain
