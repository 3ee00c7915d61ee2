#include "worker/network/layers/conv2d_transpose.h"

#include <algorithm>
#include <string>

namespace pstrain {
namespace worker {

Status Conv2DTranspose::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "inputs", "filters", "kernel", "stride",
                                  "padding", "output_size", "use_bias", "init"}));
  ASSIGN_OR_RETURN(filters_, node.GetInt("filters"));
  if (filters_ < 1) return node.Error("field 'filters' must be >= 1");
  if (!node.Has("kernel")) return node.Error("missing field 'kernel'");
  ASSIGN_OR_RETURN(kernel_, ReadPair(node, "kernel", 1));
  ASSIGN_OR_RETURN(stride_, ReadPair(node, "stride", 1));
  ASSIGN_OR_RETURN(padding_, ReadPadding(node, "padding", Padding::kSame));
  if (node.Has("output_size")) {
    ASSIGN_OR_RETURN(output_size_, ReadPair(node, "output_size", 1));
  }
  ASSIGN_OR_RETURN(use_bias_, node.GetBool("use_bias", true));
  ASSIGN_OR_RETURN(init_, ReadInit(node));
  return Status::OK();
}

Result<Window1D> Conv2DTranspose::OutputWindow(int64_t in, int64_t kernel, int64_t stride,
                                               int64_t wanted, int64_t* out,
                                               const char* axis) const {
  const bool same = padding_ == Padding::kSame;
  // The sizes whose conv2d gives `in`: SAME ceil(size / stride) == in, VALID
  // ceil((size - kernel + 1) / stride) == in.
  const int64_t lo = (in - 1) * stride + (same ? 1 : kernel);
  const int64_t hi = lo + stride - 1;
  int64_t size = same ? in * stride : in * stride + std::max<int64_t>(kernel - stride, 0);
  if (wanted > 0) {
    if (wanted < lo || wanted > hi) {
      return ShapeError("field 'output_size': " + std::string(axis) + " " + std::to_string(wanted) +
                        " is not a size whose " + (same ? "SAME" : "VALID") + " conv2d (kernel " +
                        std::to_string(kernel) + ", stride " + std::to_string(stride) +
                        ") gives the input's " + std::to_string(in) + "; expected " +
                        std::to_string(lo) +
                        (hi > lo ? " to " + std::to_string(hi) : std::string()));
    }
    size = wanted;
  }
  auto w = ComputeWindow(size, kernel, stride, padding_);
  if (!w.ok() || w->out != in) {  // only an empty input gets here
    return ShapeError("no output " + std::string(axis) + " maps back to the input's " +
                      std::to_string(in));
  }
  *out = size;
  return w;
}

Result<Shape> Conv2DTranspose::Setup(const std::vector<Shape>& inputs) {
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
  const bool explicit_size = !output_size_.empty();
  ASSIGN_OR_RETURN(g_.wh, OutputWindow(g_.in_h, g_.kh, g_.sh, explicit_size ? output_size_[0] : 0,
                                       &g_.out_h, "height"));
  ASSIGN_OR_RETURN(g_.ww, OutputWindow(g_.in_w, g_.kw, g_.sw, explicit_size ? output_size_[1] : 0,
                                       &g_.out_w, "width"));
  ASSIGN_OR_RETURN(Variable * w, AddVariable("weights", Shape{g_.in_c, g_.out_c, g_.kh, g_.kw}));
  weights_ = w->value;
  weights_grad_ = w->grad;
  if (use_bias_) {
    ASSIGN_OR_RETURN(Variable * b, AddVariable("bias", Shape{g_.out_c}));
    bias_ = b->value;
    bias_grad_ = b->grad;
  }
  return Shape{g_.out_c, g_.out_h, g_.out_w};
}

void Conv2DTranspose::InitVariables(std::mt19937_64* rng) {
  // Fans as Keras counts them for Conv2DTranspose (and PyTorch for ConvTranspose2d): those of
  // the conv2d whose input gradient this is, fan_in = filters * kh * kw.
  InitWeights(init_, g_.out_c * g_.kh * g_.kw, g_.in_c * g_.kh * g_.kw, rng, &weights_);
  if (use_bias_) bias_.SetZero();
}

PSTRAIN_REGISTER_LAYER("conv2d_transpose", Conv2DTranspose);

}  // namespace worker
}  // namespace pstrain
