#include "worker/network/layers/conv_base.h"

#include <utility>

namespace pstrain {
namespace worker {

Status ConvBase::ConfigureConv(const ConfigNode& node, const std::vector<std::string>& extra_keys) {
  std::vector<std::string> keys = {"name",   "type",   "inputs", "filters",
                                   "kernel", "stride", "padding"};
  keys.insert(keys.end(), extra_keys.begin(), extra_keys.end());
  keys.insert(keys.end(), {"use_bias", "init"});
  RETURN_IF_ERROR(node.CheckKeys(keys));
  ASSIGN_OR_RETURN(filters_, node.GetInt("filters"));
  if (filters_ < 1) return node.Error("field 'filters' must be >= 1");
  if (!node.Has("kernel")) return node.Error("missing field 'kernel'");
  ASSIGN_OR_RETURN(kernel_, ReadPair(node, "kernel", 1));
  ASSIGN_OR_RETURN(stride_, ReadPair(node, "stride", 1));
  ASSIGN_OR_RETURN(padding_, ReadPadding(node, "padding", Padding::kSame));
  return ReadWeightFields(node, &use_bias_, &init_);
}

Result<Shape> ConvBase::Setup(const std::vector<Shape>& inputs) {
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
  ASSIGN_OR_RETURN(g_.wh, OutputWindow(0, g_.in_h, g_.kh, g_.sh, &g_.out_h));
  ASSIGN_OR_RETURN(g_.ww, OutputWindow(1, g_.in_w, g_.kw, g_.sw, &g_.out_w));
  ASSIGN_OR_RETURN(Variable * w, AddVariable("weights", Shape{conv_y_channels(), conv_x_channels(),
                                                              g_.kh, g_.kw}));
  weights_ = w->value;
  weights_grad_ = w->grad;
  if (use_bias_) {
    ASSIGN_OR_RETURN(Variable * b, AddVariable("bias", Shape{g_.out_c}));
    bias_ = b->value;
    bias_grad_ = b->grad;
  }
  return Shape{g_.out_c, g_.out_h, g_.out_w};
}

void ConvBase::InitVariables(std::mt19937_64* rng) {
  // The conv's fans, as Keras and PyTorch count them for both layers: conv2d_transpose's
  // fan_in is filters * kh * kw.
  InitWeights(init_, conv_x_channels() * g_.kh * g_.kw, conv_y_channels() * g_.kh * g_.kw, rng,
              &weights_);
  if (use_bias_) bias_.SetZero();
}

GraphOp ConvBase::TensorFlowConvOp(std::string op) const {
  return GraphOp(std::move(op))
      .Ints("strides", {1, 1, g_.sh, g_.sw})
      .String("padding", PaddingName(padding_))
      .String("data_format", "NCHW")
      .Ints("dilations", {1, 1, 1, 1});
}

GraphOp ConvBase::OnnxConvOp(std::string op, std::vector<int64_t> pads) const {
  return GraphOp(std::move(op))
      .Ints("kernel_shape", {g_.kh, g_.kw})
      .Ints("strides", {g_.sh, g_.sw})
      .Ints("pads", std::move(pads))
      .Ints("dilations", {1, 1})
      .Int("group", 1);
}

}  // namespace worker
}  // namespace pstrain
