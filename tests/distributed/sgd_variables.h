// The variables of tests/distributed/testdata/sgd.yaml's model (plain SGD, learning rate 1, so
// a test can predict every value), as a worker holds them.
#pragma once

#include <string>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace testing {

struct SgdVariables {
  worker::Variable weights = Make("fc/weights", Shape{4, 2}, 1.0f);
  worker::Variable bias = Make("fc/bias", Shape{2}, 0.5f);
  static worker::Variable Make(const std::string& name, const Shape& shape, float value) {
    worker::Variable v;
    v.name = name;
    v.value = Tensor::Filled(shape, value);
    v.grad = Tensor::Filled(shape, 0.0f);
    return v;
  }
  std::vector<worker::Variable*> all() { return {&weights, &bias}; }
  void SetGradients(float g) {
    weights.grad.Fill(g);
    bias.grad.Fill(g);
  }
};

}  // namespace testing
}  // namespace pstrain
