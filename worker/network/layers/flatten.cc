#include "worker/network/layers/flatten.h"

namespace pstrain {
namespace worker {

Status Flatten::Configure(const ConfigNode& node) {
  return node.CheckKeys({"name", "type", "inputs"});
}

// TensorFlow's Flatten is a Reshape to [batch, -1] (its shape an int32 tensor).
Result<GraphOp> Flatten::TensorFlowOp() const {
  return GraphOp("Reshape").Type("Tshape", GraphDataType::kInt32);
}
Result<GraphOp> Flatten::OnnxOp() const { return GraphOp("Flatten").Int("axis", 1); }

PSTRAIN_REGISTER_LAYER("flatten", Flatten);

}  // namespace worker
}  // namespace pstrain
