// ReLU: max(x, 0), elementwise.
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Relu : public Layer {
 public:
  explicit Relu(const std::string& name) : Layer(name, "relu") {}
  Result<Shape> Setup(const std::vector<Shape>& inputs) override { return inputs[0]; }

  PSTRAIN_DECLARE_LAYER()
  PSTRAIN_DECLARE_GPU_KERNELS()
};

}  // namespace worker
}  // namespace pstrain
