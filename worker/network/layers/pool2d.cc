#include "worker/network/layers/pool2d.h"

namespace pstrain {
namespace worker {

Status Pool2D::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "size", "stride", "padding"}));
  if (!node.Has("size")) return node.Error("missing field 'size'");
  ASSIGN_OR_RETURN(size_, ReadPair(node, "size", 2));
  // TF's default stride for pooling is the window size.
  ASSIGN_OR_RETURN(stride_, ReadPair(node, "stride", size_[0]));
  if (!node.Has("stride")) stride_ = size_;
  ASSIGN_OR_RETURN(padding_, ReadPadding(node, "padding", Padding::kValid));
  return Status::OK();
}

Result<Shape> Pool2D::Setup(const std::vector<Shape>& inputs) {
  const Shape& s = inputs[0];
  if (s.rank() != 3) {
    return ShapeError("expects an input of [channels, height, width], got " + s.ToString());
  }
  c_ = s.dim(0);
  in_h_ = s.dim(1);
  in_w_ = s.dim(2);
  auto wh = ComputeWindow(in_h_, size_[0], stride_[0], padding_);
  auto ww = ComputeWindow(in_w_, size_[1], stride_[1], padding_);
  if (!wh.ok()) return ShapeError("input " + s.ToString() + ": " + wh.status().message());
  if (!ww.ok()) return ShapeError("input " + s.ToString() + ": " + ww.status().message());
  wh_ = wh.value();
  ww_ = ww.value();
  return Shape{c_, wh_.out, ww_.out};
}

Result<GraphOp> Pool2D::TensorFlowOp() const {
  return GraphOp(kind_ == Kind::kMax ? "MaxPool" : "AvgPool")
      .Ints("ksize", {1, 1, size_[0], size_[1]})
      .Ints("strides", {1, 1, stride_[0], stride_[1]})
      .String("padding", PaddingName(padding_))
      .String("data_format", "NCHW");
}

Result<GraphOp> Pool2D::OnnxOp() const {
  RETURN_IF_ERROR(CheckExplicitPads(Describe(), "height", in_h_, size_[0], stride_[0], wh_));
  RETURN_IF_ERROR(CheckExplicitPads(Describe(), "width", in_w_, size_[1], stride_[1], ww_));
  GraphOp op(kind_ == Kind::kMax ? "MaxPool" : "AveragePool");
  op.Ints("kernel_shape", size_)
      .Ints("strides", stride_)
      .Ints("pads", {wh_.pad_before, ww_.pad_before, wh_.pad_after, ww_.pad_after});
  // TensorFlow's SAME average divides by the real pixels only (MaxPool ignores pads anyway).
  if (kind_ == Kind::kAvg) op.Int("count_include_pad", 0);
  return op;
}

PSTRAIN_REGISTER_LAYER("max_pool", MaxPool2D);
PSTRAIN_REGISTER_LAYER("avg_pool", AvgPool2D);

}  // namespace worker
}  // namespace pstrain
