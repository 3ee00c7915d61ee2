#include "worker/network/layers/add.h"

namespace pstrain {
namespace worker {

Status Add::Configure(const ConfigNode& node) { return node.CheckKeys({"name", "type", "inputs"}); }

Result<Shape> Add::Setup(const std::vector<Shape>& inputs) {
  if (inputs[0] != inputs[1]) {
    return ShapeError("inputs must have the same shape, got " + inputs[0].ToString() + " and " +
                      inputs[1].ToString());
  }
  return inputs[0];
}

Result<GraphOp> Add::TensorFlowOp() const { return GraphOp("AddV2"); }
Result<GraphOp> Add::OnnxOp() const { return GraphOp("Add"); }

PSTRAIN_REGISTER_LAYER("add", Add);

}  // namespace worker
}  // namespace pstrain
