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

PSTRAIN_REGISTER_LAYER("conv2d", Conv2D);

}  // namespace worker
}  // namespace pstrain
