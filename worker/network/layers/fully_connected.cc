#include "worker/network/layers/fully_connected.h"

namespace pstrain {
namespace worker {

Status FullyConnected::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "units", "use_bias", "init"}));
  ASSIGN_OR_RETURN(units_, node.GetInt("units"));
  if (units_ < 1) return node.Error("field 'units' must be >= 1");
  return ReadWeightFields(node, &use_bias_, &init_);
}

Result<Shape> FullyConnected::Setup(const std::vector<Shape>& inputs) {
  const Shape& s = inputs[0];
  if (s.rank() != 1) {
    return ShapeError("expects a flat input [features], got " + s.ToString() +
                      " (add a flatten layer before it)");
  }
  features_ = s.dim(0);
  ASSIGN_OR_RETURN(Variable * w, AddVariable("weights", Shape{units_, features_}));
  weights_ = w->value;
  weights_grad_ = w->grad;
  if (use_bias_) {
    ASSIGN_OR_RETURN(Variable * b, AddVariable("bias", Shape{units_}));
    bias_ = b->value;
    bias_grad_ = b->grad;
  }
  return Shape{units_};
}

void FullyConnected::InitVariables(std::mt19937_64* rng) {
  InitWeights(init_, features_, units_, rng, &weights_);
  if (use_bias_) bias_.SetZero();
}

// y = x W^T + b with W [units, features]: MatMul and Gemm with the second operand transposed.
Result<GraphOp> FullyConnected::TensorFlowOp() const {
  return GraphOp("MatMul").Bool("transpose_a", false).Bool("transpose_b", true);
}
Result<GraphOp> FullyConnected::OnnxOp() const { return GraphOp("Gemm").Int("transB", 1); }

PSTRAIN_REGISTER_LAYER("fully_connected", FullyConnected);

}  // namespace worker
}  // namespace pstrain
