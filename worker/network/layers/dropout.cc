#include "worker/network/layers/dropout.h"

namespace pstrain {
namespace worker {

Status Dropout::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "keep_prob"}));
  ASSIGN_OR_RETURN(double keep, node.GetDouble("keep_prob"));
  if (!(keep > 0.0 && keep <= 1.0)) {
    return node.Error("field 'keep_prob' must be in (0, 1], got " + std::to_string(keep));
  }
  keep_prob_ = static_cast<float>(keep);
  return Status::OK();
}

// Dropout is a subgraph in TensorFlow; the graph keeps Keras's layer name. In inference (ONNX)
// it is the identity.
Result<GraphOp> Dropout::TensorFlowOp() const { return GraphOp("Dropout"); }
Result<GraphOp> Dropout::OnnxOp() const { return GraphOp("Identity"); }

PSTRAIN_REGISTER_LAYER("dropout", Dropout);

}  // namespace worker
}  // namespace pstrain
