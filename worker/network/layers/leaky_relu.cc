#include "worker/network/layers/leaky_relu.h"

#include <cmath>

namespace pstrain {
namespace worker {

Status LeakyRelu::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "alpha"}));
  ASSIGN_OR_RETURN(double alpha, node.GetDouble("alpha", 0.2));
  if (!std::isfinite(alpha)) {
    return node.Error("field 'alpha' must be a finite number, got " + std::to_string(alpha));
  }
  alpha_ = static_cast<float>(alpha);
  return Status::OK();
}

Result<GraphOp> LeakyRelu::TensorFlowOp() const {
  return GraphOp("LeakyRelu").Float("alpha", alpha_);
}

Result<GraphOp> LeakyRelu::OnnxOp() const { return GraphOp("LeakyRelu").Float("alpha", alpha_); }

PSTRAIN_REGISTER_LAYER("leaky_relu", LeakyRelu);

}  // namespace worker
}  // namespace pstrain
