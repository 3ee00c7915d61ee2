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

PSTRAIN_REGISTER_LAYER("conv2d_transpose", Conv2DTranspose);

}  // namespace worker
}  // namespace pstrain
