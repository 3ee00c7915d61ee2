#include "worker/network/layers/concat.h"

namespace pstrain {
namespace worker {

Status Concat::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs"}));
  if (node.Has("inputs")) {
    ASSIGN_OR_RETURN(ConfigNode inputs, node.Child("inputs"));
    if (!inputs.IsSequence() || inputs.size() < 2) {
      return inputs.Error("concat needs a list of at least two inputs");
    }
    num_inputs_ = static_cast<int>(inputs.size());
  }
  return Status::OK();
}

Result<Shape> Concat::Setup(const std::vector<Shape>& inputs) {
  const Shape& first = inputs[0];
  std::vector<int64_t> dims = first.dims();
  widths_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i];
    bool same_rest = s.rank() == first.rank() && s.rank() >= 1;
    for (int a = 1; same_rest && a < s.rank(); ++a) same_rest = s.dim(a) == first.dim(a);
    if (!same_rest) {
      return ShapeError("input " + std::to_string(i) + " " + s.ToString() + " must match input 0 " +
                        first.ToString() + " on every axis but the first");
    }
    if (i > 0) dims[0] += s.dim(0);
    widths_.push_back(s.num_elements());
  }
  Shape out(dims);
  width_ = out.num_elements();
  return out;
}

Result<GraphOp> Concat::TensorFlowOp() const {
  // ConcatV2 reads its values, then the axis (1: the batch is axis 0).
  std::vector<GraphOpInput> reads;
  for (int k = 0; k < num_inputs_; ++k) reads.push_back(GraphOpInput::LayerInput(k));
  reads.push_back(GraphOpInput::Constant(GraphDataType::kInt32, {}, {1}));
  return GraphOp("ConcatV2").Int("N", num_inputs_).Type("Tidx", GraphDataType::kInt32).Reads(reads);
}

Result<GraphOp> Concat::OnnxOp() const { return GraphOp("Concat").Int("axis", 1); }

PSTRAIN_REGISTER_LAYER("concat", Concat);

}  // namespace worker
}  // namespace pstrain
