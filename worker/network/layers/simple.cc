#include "worker/network/layers/simple.h"

namespace pstrain {
namespace worker {

Status Relu::Configure(const ConfigNode& node) {
  return node.CheckKeys({"name", "type", "inputs"});
}

Status Flatten::Configure(const ConfigNode& node) {
  return node.CheckKeys({"name", "type", "inputs"});
}

Status Dropout::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "keep_prob"}));
  ASSIGN_OR_RETURN(double keep, node.GetDouble("keep_prob"));
  if (!(keep > 0.0 && keep <= 1.0)) {
    return node.Error("field 'keep_prob' must be in (0, 1], got " + std::to_string(keep));
  }
  keep_prob_ = static_cast<float>(keep);
  return Status::OK();
}

Status Add::Configure(const ConfigNode& node) { return node.CheckKeys({"name", "type", "inputs"}); }

Result<Shape> Add::Setup(const std::vector<Shape>& inputs) {
  if (inputs[0] != inputs[1]) {
    return ShapeError("inputs must have the same shape, got " + inputs[0].ToString() + " and " +
                      inputs[1].ToString());
  }
  return inputs[0];
}

PSTRAIN_REGISTER_LAYER("relu", Relu);
PSTRAIN_REGISTER_LAYER("flatten", Flatten);
PSTRAIN_REGISTER_LAYER("dropout", Dropout);
PSTRAIN_REGISTER_LAYER("add", Add);

}  // namespace worker
}  // namespace pstrain
