// Flatten: [C, H, W] to [C*H*W] per example (a copy; the order is unchanged).
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Flatten : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override {
    return Shape{inputs[0].num_elements()};
  }

  PSTRAIN_DECLARE_LAYER()
};

}  // namespace worker
}  // namespace pstrain
