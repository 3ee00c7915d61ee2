// The variables of a config's model, layer by layer, as pstrain builds them (Model::FromConfig):
// JSON on stdout, for the benches that give another framework the same model's bytes
// (bench/ddp_anchor.py's PyTorch DDP layers), so that none of them walks the shapes again.
//   [{"layer": "conv1", "variables": [{"name": "conv1/weights", "shape": [64, 3, 7, 7],
//     "trainable": true}, ...]}, ...]    layers without variables left out, input side first
#include <gflags/gflags.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tools/tool_main.h"
#include "worker/network/model.h"

DEFINE_string(config, "configs/resnet50.yaml", "the model's config (YAML)");

namespace pstrain {
namespace {

Status Main() {
  ASSIGN_OR_RETURN(std::unique_ptr<worker::Model> model, worker::Model::FromConfigFile(FLAGS_config));
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : model->layers()) {
    if (layer->variables().empty()) continue;
    nlohmann::json variables = nlohmann::json::array();
    for (const worker::Variable& v : layer->variables()) {
      variables.push_back(
          {{"name", v.name}, {"shape", v.value.shape().dims()}, {"trainable", v.trainable}});
    }
    layers.push_back({{"layer", layer->name()}, {"variables", variables}});
  }
  std::printf("%s\n", layers.dump().c_str());
  return Status::OK();
}

}  // namespace
}  // namespace pstrain

PSTRAIN_TOOL_MAIN(
    "The variables of a config's model, layer by layer, as JSON.\nUsage: "
    "pstrain-bench-model-table --config=configs/resnet50.yaml",
    pstrain::Main);
