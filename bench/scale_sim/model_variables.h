// The model's variables in layer order, with their shapes, as pstrain builds them from a config
// (Model::FromConfig; ResNet-50 from configs/resnet50.yaml): which bytes each layer's backward
// hands out, and in which order. The simulator needs no more of the model than this.
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
// batch-norm statistics), in the model's order, of the model `config_path` describes; a config
// that does not build stops the program, naming the error.
std::vector<SimVariable> ModelVariables(const std::string& config_path);

// ModelVariables of configs/resnet50.yaml in this source tree, built once.
const std::vector<SimVariable>& ResNet50Variables();

}  // namespace scale_sim
