#include "worker/network/layers/conv2d_transpose.h"

#include <algorithm>
#include <string>

namespace pstrain {
namespace worker {

Status Conv2DTranspose::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(ConfigureConv(node, {"output_size"}));
  if (node.Has("output_size")) {
    ASSIGN_OR_RETURN(output_size_, ReadPair(node, "output_size", 1));
  }
  return Status::OK();
}

Result<Window1D> Conv2DTranspose::OutputWindow(int dim, int64_t in, int64_t kernel, int64_t stride,
                                               int64_t* out) const {
  const std::string axis = dim == 0 ? "height" : "width";
  const int64_t wanted = output_size_.empty() ? 0 : output_size_[dim];
  const bool same = padding_ == Padding::kSame;
  // The sizes whose conv2d gives `in`: SAME ceil(size / stride) == in, VALID
  // ceil((size - kernel + 1) / stride) == in.
  const int64_t lo = (in - 1) * stride + (same ? 1 : kernel);
  const int64_t hi = lo + stride - 1;
  int64_t size = same ? in * stride : in * stride + std::max<int64_t>(kernel - stride, 0);
  if (wanted > 0) {
    if (wanted < lo || wanted > hi) {
      return ShapeError(
          "field 'output_size': " + axis + " " + std::to_string(wanted) + " is not a size whose " +
          (same ? "SAME" : "VALID") + " conv2d (kernel " + std::to_string(kernel) + ", stride " +
          std::to_string(stride) + ") gives the input's " + std::to_string(in) + "; expected " +
          std::to_string(lo) + (hi > lo ? " to " + std::to_string(hi) : std::string()));
    }
    size = wanted;
  }
  auto w = ComputeWindow(size, kernel, stride, padding_);
  if (!w.ok() || w->out != in) {  // only an empty input gets here
    return ShapeError("no output " + axis + " maps back to the input's " + std::to_string(in));
  }
  *out = size;
  return w;
}

Result<GraphOp> Conv2DTranspose::TensorFlowOp() const {
  return TensorFlowConvOp("Conv2DBackpropInput");
}

namespace {
// ConvTranspose's (begin, end) pads and output_padding along one axis for the layer's output
// size: the full transposed convolution is (in - 1) * stride + kernel long; the conv2d's
// pad_before is cropped at the start, and the end is cropped (pads) or extended (output_padding,
// positions no window reaches, which get only the bias) to the layer's size.
struct TransposeAxis {
  int64_t pad_begin, pad_end, output_padding;
};
TransposeAxis TransposePads(int64_t in, int64_t kernel, int64_t stride, int64_t out,
                            const Window1D& w) {
  const int64_t full = (in - 1) * stride + kernel;
  const int64_t end = full - w.pad_before - out;
  return end >= 0 ? TransposeAxis{w.pad_before, end, 0} : TransposeAxis{w.pad_before, 0, -end};
}
}  // namespace

Result<GraphOp> Conv2DTranspose::OnnxOp() const {
  const TransposeAxis h = TransposePads(g_.in_h, g_.kh, g_.sh, g_.out_h, g_.wh);
  const TransposeAxis w = TransposePads(g_.in_w, g_.kw, g_.sw, g_.out_w, g_.ww);
  if (h.output_padding >= g_.sh || w.output_padding >= g_.sw) {  // ONNX requires < stride
    return InvalidArgument(Describe() + ": no ONNX form for an output " + std::to_string(g_.out_h) +
                           "x" + std::to_string(g_.out_w) +
                           " this far beyond the transposed convolution's reach");
  }
  return OnnxConvOp("ConvTranspose", {h.pad_begin, w.pad_begin, h.pad_end, w.pad_end})
      .Ints("output_padding", {h.output_padding, w.output_padding});
}

PSTRAIN_REGISTER_LAYER("conv2d_transpose", Conv2DTranspose);

}  // namespace worker
}  // namespace pstrain
