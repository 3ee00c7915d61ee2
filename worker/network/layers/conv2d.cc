#include "worker/network/layers/conv2d.h"

namespace pstrain {
namespace worker {

Result<Window1D> Conv2D::OutputWindow(int /*dim*/, int64_t in, int64_t kernel, int64_t stride,
                                      int64_t* out) const {
  auto w = ComputeWindow(in, kernel, stride, padding_);
  if (!w.ok()) {
    return ShapeError("input " + Shape{g_.in_c, g_.in_h, g_.in_w}.ToString() + ": " +
                      w.status().message());
  }
  *out = w->out;
  return w;
}

Result<GraphOp> Conv2D::TensorFlowOp() const { return TensorFlowConvOp("Conv2D"); }

Result<GraphOp> Conv2D::OnnxOp() const {
  RETURN_IF_ERROR(CheckExplicitPads(Describe(), "height", g_.in_h, g_.kh, g_.sh, g_.wh));
  RETURN_IF_ERROR(CheckExplicitPads(Describe(), "width", g_.in_w, g_.kw, g_.sw, g_.ww));
  // TensorFlow's SAME puts the odd pixel after: explicit, possibly asymmetric pads.
  return OnnxConvOp("Conv", {g_.wh.pad_before, g_.ww.pad_before, g_.wh.pad_after, g_.ww.pad_after});
}

PSTRAIN_REGISTER_LAYER("conv2d", Conv2D);

}  // namespace worker
}  // namespace pstrain
