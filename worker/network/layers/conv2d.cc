#include "worker/network/layers/conv2d.h"

namespace pstrain {
namespace worker {

Status Conv2D::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys(
      {"name", "type", "inputs", "filters", "kernel", "stride", "padding", "use_bias", "init"}));
  ASSIGN_OR_RETURN(filters_, node.GetInt("filters"));
  if (filters_ < 1) return node.Error("field 'filters' must be >= 1");
  if (!node.Has("kernel")) return node.Error("missing field 'kernel'");
  ASSIGN_OR_RETURN(kernel_, ReadPair(node, "kernel", 1));
  ASSIGN_OR_RETURN(stride_, ReadPair(node, "stride", 1));
  ASSIGN_OR_RETURN(padding_, ReadPadding(node, "padding", Padding::kSame));
  ASSIGN_OR_RETURN(use_bias_, node.GetBool("use_bias", true));
  ASSIGN_OR_RETURN(init_, ReadInit(node));
  return Status::OK();
}

Result<Shape> Conv2D::Setup(const std::vector<Shape>& inputs) {
  const Shape& s = inputs[0];
  if (s.rank() != 3) {
    return ShapeError("expects an input of [channels, height, width], got " + s.ToString());
  }
  g_.in_c = s.dim(0);
  g_.in_h = s.dim(1);
  g_.in_w = s.dim(2);
  g_.out_c = filters_;
  g_.kh = kernel_[0];
  g_.kw = kernel_[1];
  g_.sh = stride_[0];
  g_.sw = stride_[1];
  auto wh = ComputeWindow(g_.in_h, g_.kh, g_.sh, padding_);
  auto ww = ComputeWindow(g_.in_w, g_.kw, g_.sw, padding_);
  if (!wh.ok()) return ShapeError("input " + s.ToString() + ": " + wh.status().message());
  if (!ww.ok()) return ShapeError("input " + s.ToString() + ": " + ww.status().message());
  g_.wh = wh.value();
  g_.ww = ww.value();
  g_.out_h = g_.wh.out;
  g_.out_w = g_.ww.out;
  ASSIGN_OR_RETURN(Variable * w, AddVariable("weights", Shape{g_.out_c, g_.in_c, g_.kh, g_.kw}));
  weights_ = w->value;
  weights_grad_ = w->grad;
  if (use_bias_) {
    ASSIGN_OR_RETURN(Variable * b, AddVariable("bias", Shape{g_.out_c}));
    bias_ = b->value;
    bias_grad_ = b->grad;
  }
  return Shape{g_.out_c, g_.out_h, g_.out_w};
}

void Conv2D::InitVariables(std::mt19937_64* rng) {
  InitWeights(init_, g_.in_c * g_.kh * g_.kw, g_.out_c * g_.kh * g_.kw, rng, &weights_);
  if (use_bias_) bias_.SetZero();
}

PSTRAIN_REGISTER_LAYER("conv2d", Conv2D);

}  // namespace worker
}  // namespace pstrain
