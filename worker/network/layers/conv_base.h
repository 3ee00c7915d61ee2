// What conv2d and conv2d_transpose share, as Caffe's ConvolutionLayer and DeconvolutionLayer share
// BaseConvolutionLayer: the fields (filters, kernel, stride, padding, use_bias, init), the
// geometry, the weights and their initialisation, and the kernels' plumbing.
//
// Both layers are described by one convolution, "the conv": conv2d is the conv (our input is its
// x, our output its y); conv2d_transpose is the conv's input gradient (our input is its y, our
// output its x). The weights are the conv's OIHW filter either way, [filters, in_channels, kh, kw]
// for conv2d and [in_channels, filters, kh, kw] for conv2d_transpose, and the padding is the
// conv's (window.h, TensorFlow's SAME). The kernels are the base's, for both layers: on the CPU
// (conv_base_cpu.cc) oneDNN's convolution primitives, or its deconvolution ones when transposed;
// on the GPU (conv_base_cuda.cc) cuDNN's descriptors and the conv's three passes, composed into
// either layer's forward and backward passes by which of our tensors is the conv's x. A layer's
// own files hold what differs: its extra fields, its output size and its exports.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/network/layer.h"
#include "worker/network/layers/init.h"
#include "worker/network/layers/window.h"

namespace pstrain {
namespace worker {

class ConvBase : public Layer {
 public:
  // wh, ww: the conv's windows along our input (conv2d) or our output (conv2d_transpose).
  struct Geometry {
    int64_t in_c, in_h, in_w, out_c, out_h, out_w, kh, kw, sh, sw;
    Window1D wh, ww;
  };
  const Geometry& geometry() const { return g_; }
  bool has_bias() const { return use_bias_; }

  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

  // The oneDNN plan of one batch size (conv_base_cpu.h).
  struct CpuPlan;

 protected:
  explicit ConvBase(bool transposed) : transposed_(transposed) {}

  // Reads the fields both layers share and allows the subclass's `extra_keys` (read by it).
  Status ConfigureConv(const ConfigNode& node, const std::vector<std::string>& extra_keys);
  // The output size along axis `dim` (0: height, 1: width) of the input's `in` and the conv's
  // window there; errors go through ShapeError.
  virtual Result<Window1D> OutputWindow(int dim, int64_t in, int64_t kernel, int64_t stride,
                                        int64_t* out) const = 0;
  // The attributes both layers' exports share: TensorFlow's (strides, padding, NCHW, dilations)
  // and ONNX's (kernel_shape, strides, dilations, group; `pads` as ONNX orders them).
  GraphOp TensorFlowConvOp(std::string op) const;
  GraphOp OnnxConvOp(std::string op, std::vector<int64_t> pads) const;

  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()

  // cuDNN's descriptors, algorithms and padding buffers of one batch size (conv_base_cuda.cc).
  struct GpuPlan;
#if PSTRAIN_HAVE_GPU_BACKEND
  GpuPlan& GetGpuPlan(int64_t batch, const LayerContext& ctx);
  // The conv's passes, on tensors of the conv's x (unpadded, as the layers hold them) and y.
  // cuDNN pads symmetrically only, so for TensorFlow's asymmetric SAME x is padded explicitly.
  // x as cuDNN reads it: `x` itself, or padded into the plan's buffer.
  const float* PaddedX(GpuPlan& p, const float* x, const LayerContext& ctx);
  // y = conv(x) from the PaddedX of x (cudnnConvolutionForward).
  void ConvolveXToY(GpuPlan& p, const float* padded_x, float* y, const LayerContext& ctx);
  // x = conv's input gradient of y (cudnnConvolutionBackwardData), cropped out of the padding.
  void ConvolveYToX(GpuPlan& p, const float* y, float* x, const LayerContext& ctx);
  // The weights' gradient from the PaddedX of x and y (cudnnConvolutionBackwardFilter).
  void WeightsGradient(GpuPlan& p, const float* padded_x, const float* y, const LayerContext& ctx);
  // Adds the bias to our output; sets the bias gradient from our output's gradient.
  void AddBias(GpuPlan& p, float* out, const LayerContext& ctx);
  void BiasGradient(GpuPlan& p, const float* out_grad, const LayerContext& ctx);
#endif

  const bool transposed_;
  int64_t filters_ = 0;
  std::vector<int64_t> kernel_, stride_;
  Padding padding_ = Padding::kSame;
  bool use_bias_ = true;
  Init init_ = Init::kGlorotUniform;
  Geometry g_{};
  Tensor weights_, weights_grad_, bias_, bias_grad_;

 private:
  CpuPlan& GetCpuPlan(int64_t batch, bool need_input_grad);
  // The conv's x and y channels: ours in and out, or out and in when transposed.
  int64_t conv_x_channels() const { return transposed_ ? g_.out_c : g_.in_c; }
  int64_t conv_y_channels() const { return transposed_ ? g_.in_c : g_.out_c; }

  std::map<int64_t, std::shared_ptr<CpuPlan>> cpu_plans_;  // by batch size
  std::map<int64_t, std::shared_ptr<GpuPlan>> gpu_plans_;
};

// Declares what a layer derived from ConvBase defines in its <name>.cc: its exports and its
// output size. Its Configure it declares itself.
#define PSTRAIN_DECLARE_CONV_LAYER()                                                               \
 public:                                                                                           \
  Result<GraphOp> TensorFlowOp() const override;                                                   \
  Result<GraphOp> OnnxOp() const override;                                                         \
                                                                                                   \
 protected:                                                                                        \
  Result<Window1D> OutputWindow(int dim, int64_t in, int64_t kernel, int64_t stride, int64_t* out) \
      const override;

}  // namespace worker
}  // namespace pstrain
