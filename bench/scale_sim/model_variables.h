// ResNet-50's variables in layer order, with their shapes, as configs/resnet50.yaml builds them
// (bench/make_resnet50_config.py writes that file from the same table of stages): conv2d weights
// [out, in, k, k] without bias, batch_norm's gamma, beta, moving_mean and moving_variance [C],
// fully_connected weights [1000, 2048] and bias. The simulator needs no more of the model than
// this: which bytes each layer's backward hands out, and in which order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scale_sim {

struct SimVariable {
  std::string name;  // "s1b1_conv1/weights", as the model names it
  int layer = 0;     // index among the layers that have variables, input side first
  bool trainable = true;
  std::vector<int64_t> shape;
  int64_t elements() const;
  int64_t bytes() const { return 4 * elements(); }
};

// Every variable a worker pushes and pulls (gradients of the trainable ones, values of the
// batch-norm statistics), in the model's order.
std::vector<SimVariable> ResNet50Variables();

}  // namespace scale_sim
