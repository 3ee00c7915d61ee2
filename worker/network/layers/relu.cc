#include "worker/network/layers/relu.h"

namespace pstrain {
namespace worker {

Status Relu::Configure(const ConfigNode& node) {
  return node.CheckKeys({"name", "type", "inputs"});
}

Result<GraphOp> Relu::TensorFlowOp() const { return GraphOp("Relu"); }
Result<GraphOp> Relu::OnnxOp() const { return GraphOp("Relu"); }

PSTRAIN_REGISTER_LAYER("relu", Relu);

}  // namespace worker
}  // namespace pstrain
