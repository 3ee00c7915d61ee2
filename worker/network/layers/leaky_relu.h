// Leaky ReLU: x for x > 0, alpha * x otherwise, elementwise; TensorFlow's tf.nn.leaky_relu (alpha
// 0.2 by default, as there) and ONNX's LeakyRelu.
#pragma once

#include <string>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class LeakyRelu : public ElementwiseLayer {
 public:
  PSTRAIN_DECLARE_LAYER()

 private:
  float alpha_ = 0.2f;
};

}  // namespace worker
}  // namespace pstrain
