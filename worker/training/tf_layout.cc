#include "worker/training/tf_layout.h"

#include <map>
#include <string>

#include "worker/training/model_graph.h"

namespace pstrain {

Result<TfLayout> TfLayoutOf(const ConfigNode& model_node) {
  ASSIGN_OR_RETURN(GraphModel model, DescribeModel(model_node, ModelGraphOptions{}));
  std::map<std::string, std::vector<int64_t>> outputs;
  for (const GraphInput& in : model.inputs) outputs[in.name] = in.shape;
  std::map<std::string, const GraphLayer*> by_name;
  for (const GraphLayer& layer : model.layers) {
    outputs[layer.name] = layer.output_shape;
    by_name[layer.name] = &layer;
  }
  TfLayout layout;
  for (const GraphLayer& layer : model.layers) {
    if (layer.type != "fully_connected" || layer.inputs.size() != 1) continue;
    auto flatten = by_name.find(layer.inputs[0]);
    if (flatten == by_name.end() || flatten->second->type != "flatten" ||
        flatten->second->inputs.size() != 1) {
      continue;
    }
    const std::vector<int64_t>& map = outputs.at(flatten->second->inputs[0]);
    if (map.size() == 3 && map[1] * map[2] > 1) {
      layout.flattened_inputs[layer.name + "/weights"] = map;
    }
  }
  return layout;
}

Result<TfLayout> TfLayoutOfConfigFile(const std::string& config_path) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(config_path));
  ASSIGN_OR_RETURN(ConfigNode model, config.Child("model"));
  return TfLayoutOf(model);
}

Result<TfExportOptions> TfExportOptionsOfConfigFile(const std::string& config_path) {
  ASSIGN_OR_RETURN(TfExportOptions options, TfExportOptionsFromConfig(config_path));
  ASSIGN_OR_RETURN(options.layout, TfLayoutOfConfigFile(config_path));
  return options;
}

}  // namespace pstrain
