// Add: the elementwise sum of two inputs of the same shape (residual connections).
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

// Elementwise sum of two inputs of the same shape (residual connections).
class Add : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  int num_inputs() const override { return 2; }
  bool PassesGradientThrough(int) const override { return true; }

  PSTRAIN_DECLARE_LAYER()
};

}  // namespace worker
}  // namespace pstrain
