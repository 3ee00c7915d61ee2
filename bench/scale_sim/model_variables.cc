#include "bench/scale_sim/model_variables.h"

#include <cstdio>
#include <cstdlib>

#include "worker/network/model.h"

namespace scale_sim {

int64_t SimVariable::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<SimVariable> ModelVariables(const std::string& config_path) {
  auto model = pstrain::worker::Model::FromConfigFile(config_path);
  if (!model.ok()) {
    std::fprintf(stderr, "pstrain-scale-sim: %s: %s\n", config_path.c_str(),
                 model.status().ToString().c_str());
    std::exit(2);
  }
  std::vector<SimVariable> out;
  int layer = 0;
  for (const auto& l : (*model)->layers()) {
    if (l->variables().empty()) continue;
    for (const pstrain::worker::Variable& v : l->variables()) {
      out.push_back({v.name, layer, v.trainable, v.value.shape().dims()});
    }
    ++layer;
  }
  return out;
}

const std::vector<SimVariable>& ResNet50Variables() {
  static const std::vector<SimVariable> variables =
      ModelVariables(PSTRAIN_SOURCE_DIR "/configs/resnet50.yaml");
  return variables;
}

}  // namespace scale_sim
