// Transposed 2-D convolution (deconvolution), as TensorFlow's tf.nn.conv2d_transpose and Keras'
// Conv2DTranspose, over NCHW: the input gradient of the conv2d that maps this layer's output back
// to its input. Fields as conv2d's (filters, kernel, stride, padding, use_bias, init) and an
// optional output_size [h, w] where strides make it ambiguous.
//
// Output size as Keras computes it: SAME in * stride, VALID in * stride + max(kernel - stride, 0)
// ((in - 1) * stride + kernel when kernel >= stride). An explicit output_size must satisfy
// TensorFlow's rule: the conv2d of that size (same kernel, stride, padding) gives the input size.
// The padding is that conv2d's (window.h), so SAME's odd pixel falls after, as in TensorFlow.
//
// Weights [in_channels, filters, kh, kw]: the OIHW weights of that conv2d (its out = our in),
// PyTorch's ConvTranspose2d layout, TensorFlow's [kh, kw, filters, in_channels] transposed to
// channels first; so conv2d_transpose(W) is the adjoint of conv2d(W). Bias [filters].
#pragma once

#include <map>
#include <memory>

#include "worker/network/layer.h"
#include "worker/network/layers/init.h"
#include "worker/network/layers/window.h"

namespace pstrain {
namespace worker {

class Conv2DTranspose : public Layer {
 public:
  explicit Conv2DTranspose(const std::string& name) : Layer(name, "conv2d_transpose") {}
  Status Configure(const ConfigNode& node) override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

  // wh, ww: the windows of the conv2d from the output to the input (its padding is ours).
  struct Geometry {
    int64_t in_c, in_h, in_w, out_c, out_h, out_w, kh, kw, sh, sw;
    Window1D wh, ww;
  };
  const Geometry& geometry() const { return g_; }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()

 private:
  struct CpuPlan;  // oneDNN primitives (conv2d_transpose_cpu.cc)
  struct GpuPlan;  // cuDNN descriptors, algorithms and buffers (conv2d_transpose_cuda.cc)
  CpuPlan& GetCpuPlan(int64_t batch, bool need_input_grad);
  GpuPlan& GetGpuPlan(int64_t batch, const LayerContext& ctx);
  // The output size along one axis and its conv2d window, or an error naming output_size.
  Result<Window1D> OutputWindow(int64_t in, int64_t kernel, int64_t stride, int64_t wanted,
                                int64_t* out, const char* axis) const;

  int64_t filters_ = 0;
  std::vector<int64_t> kernel_, stride_, output_size_;  // output_size_ empty: computed
  Padding padding_ = Padding::kSame;
  bool use_bias_ = true;
  Init init_ = Init::kGlorotUniform;
  Geometry g_{};
  Tensor weights_, weights_grad_, bias_, bias_grad_;
  std::map<int64_t, std::shared_ptr<CpuPlan>> cpu_plans_;  // by batch size
  std::map<int64_t, std::shared_ptr<GpuPlan>> gpu_plans_;
};

}  // namespace worker
}  // namespace pstrain
