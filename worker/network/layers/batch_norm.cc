#include "worker/network/layers/batch_norm.h"

namespace pstrain {
namespace worker {

Status BatchNorm::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "momentum", "epsilon"}));
  ASSIGN_OR_RETURN(double m, node.GetDouble("momentum", 0.99));
  ASSIGN_OR_RETURN(double e, node.GetDouble("epsilon", 1e-3));
  if (!(m >= 0.0 && m < 1.0)) return node.Error("field 'momentum' must be in [0, 1)");
  if (!(e > 0.0)) return node.Error("field 'epsilon' must be > 0");
  momentum_ = static_cast<float>(m);
  epsilon_ = static_cast<float>(e);
  return Status::OK();
}

Result<Shape> BatchNorm::Setup(const std::vector<Shape>& inputs) {
  const Shape& s = inputs[0];
  if (s.rank() != 3 && s.rank() != 1) {
    return ShapeError("expects [channels, height, width] or [features], got " + s.ToString());
  }
  channels_ = s.dim(0);
  spatial_ = s.rank() == 3 ? s.dim(1) * s.dim(2) : 1;
  Shape c{channels_};
  ASSIGN_OR_RETURN(Variable * g, AddVariable("gamma", c));
  gamma_ = g->value;
  gamma_grad_ = g->grad;
  ASSIGN_OR_RETURN(Variable * b, AddVariable("beta", c));
  beta_ = b->value;
  beta_grad_ = b->grad;
  ASSIGN_OR_RETURN(Variable * mean, AddVariable("moving_mean", c, /*trainable=*/false));
  moving_mean_ = mean->value;
  ASSIGN_OR_RETURN(Variable * var, AddVariable("moving_variance", c, /*trainable=*/false));
  moving_var_ = var->value;
  return s;
}

void BatchNorm::InitVariables(std::mt19937_64*) {
  gamma_.Fill(1.0f);
  beta_.SetZero();
  moving_mean_.SetZero();
  moving_var_.Fill(1.0f);
}

// Channels of [N, C, H, W] or features of [N, F] (after a flatten): both are axis 1, TensorFlow's
// NCHW and ONNX's only axis. ONNX's is the inference form, with the moving statistics.
Result<GraphOp> BatchNorm::TensorFlowOp() const {
  return GraphOp("FusedBatchNormV3")
      .Type("U", GraphDataType::kFloat)
      .Float("epsilon", epsilon_)
      .String("data_format", "NCHW")
      .Bool("is_training", true);
}
Result<GraphOp> BatchNorm::OnnxOp() const {
  return GraphOp("BatchNormalization").Float("epsilon", epsilon_);
}

PSTRAIN_REGISTER_LAYER("batch_norm", BatchNorm);

}  // namespace worker
}  // namespace pstrain
