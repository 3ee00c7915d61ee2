// Conv2DTranspose on the GPU with cuDNN, as the conv2d it is the input gradient of (x: our
// output, y: our input, filter [in_channels, filters, kh, kw] = our weights): forward is
// cudnnConvolutionBackwardData, the input gradient cudnnConvolutionForward and the weights
// gradient cudnnConvolutionBackwardFilter. Descriptors, algorithms (cuDNN's heuristics, the first
// FP32 one, cuda/conv_algorithm.h) and buffers are made once per batch size, as conv2d_cuda.cc.
// cuDNN pads symmetrically only; for TensorFlow's asymmetric SAME the output is computed into a
// zero-padded plane without padding and cropped, and the output gradient padded back.
#include <algorithm>
#include <string>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/conv_algorithm.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/layers/conv2d_transpose.h"

namespace pstrain {
namespace worker {

struct Conv2DTranspose::GpuPlan {
  ~GpuPlan() {
    if (in) cudnnDestroyTensorDescriptor(in);
    if (out) cudnnDestroyTensorDescriptor(out);
    if (conv_x) cudnnDestroyTensorDescriptor(conv_x);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  // in: our input (the conv's y); out: our output; conv_x: the conv's x, the output inside its
  // padding (the same shape as out without explicit padding).
  cudnnTensorDescriptor_t in = nullptr, out = nullptr, conv_x = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // forward: our input gradient; backward data: our forward. The workspace is taken from
  // the context's shared one when run.
  cuda::ConvAlgorithms algos;
  bool explicit_pad = false;
  cuda::PaddedPlanes pad{};
  cuda::DeviceBuffer padded_y, padded_dy;  // only with explicit_pad
};

Status Conv2DTranspose::GpuSupport() const { return Status::OK(); }

void Conv2DTranspose::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                                 const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  cudnnHandle_t h = ctx.gpu->cudnn();
  const float one = 1.0f, zero = 0.0f;
  float* y = p.explicit_pad ? p.padded_y.as<float>() : out->data();
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
      h, &one, p.w, variables()[0].device_value.data(), p.in, in[0]->data(), p.conv,
      p.algos.backward_data, workspace, p.algos.workspace_bytes, &zero, p.conv_x, y));
  if (p.explicit_pad) cuda::Crop(y, p.pad, out->data(), ctx.gpu->stream());
  if (use_bias_) {
    PSTRAIN_CUDNN_CHECK(cudnnAddTensor(h, &one, p.bias, variables()[1].device_value.data(), &one,
                                       p.out, out->data()));
  }
}

void Conv2DTranspose::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                                  const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                                  const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  cudnnHandle_t h = ctx.gpu->cudnn();
  const float one = 1.0f, zero = 0.0f;
  const float* dy = out_grad.data();
  if (p.explicit_pad) {  // the padding's gradient is dropped: zeros
    cuda::Pad(dy, p.pad, 0.0f, p.padded_dy.as<float>(), ctx.gpu->stream());
    dy = p.padded_dy.as<float>();
  }
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, &one, p.conv_x, dy, p.in, in[0]->data(), p.conv, p.algos.backward_filter, workspace,
      p.algos.workspace_bytes, &zero, p.w, variables()[0].device_grad.data()));
  if (use_bias_) {
    PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, p.out, out_grad.data(), &zero, p.bias,
                                                     variables()[1].device_grad.data()));
  }
  if (!in_grads[0]) return;
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
      h, &one, p.conv_x, dy, p.w, variables()[0].device_value.data(), p.conv, p.algos.forward,
      workspace, p.algos.workspace_bytes, &zero, p.in, in_grads[0]->data()));
}

Conv2DTranspose::GpuPlan& Conv2DTranspose::GetGpuPlan(int64_t n, const LayerContext& ctx) {
  auto& slot = gpu_plans_[n];
  if (slot) return *slot;
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  cuda::GpuContext* gpu = ctx.gpu;
  const Geometry& g = g_;
  const std::string who = Describe();
  auto p = std::make_shared<GpuPlan>();
  p->explicit_pad = g.wh.pad_before != g.wh.pad_after || g.ww.pad_before != g.ww.pad_after;
  int64_t x_h = g.out_h, x_w = g.out_w, pad_h = g.wh.pad_before, pad_w = g.ww.pad_before;
  if (p->explicit_pad) {
    p->pad = {n * g.out_c,
              g.out_h,
              g.out_w,
              g.wh.pad_before,
              g.ww.pad_before,
              g.out_h + g.wh.pad_before + g.wh.pad_after,
              g.out_w + g.ww.pad_before + g.ww.pad_after};
    x_h = p->pad.padded_h;
    x_w = p->pad.padded_w;
    pad_h = pad_w = 0;
    const size_t bytes = static_cast<size_t>(n * g.out_c * x_h * x_w) * sizeof(float);
    p->padded_y = gpu->AllocateOrDie(bytes, who + " padded output");
    p->padded_dy = gpu->AllocateOrDie(bytes, who + " padded output gradient");
  }
  const auto f32 = CUDNN_DATA_FLOAT;
  const auto nchw = CUDNN_TENSOR_NCHW;
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->in));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->in, nchw, f32, n, g.in_c, g.in_h, g.in_w));
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->out));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->out, nchw, f32, n, g.out_c, g.out_h, g.out_w));
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->conv_x));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->conv_x, nchw, f32, n, g.out_c, x_h, x_w));
  if (use_bias_) {
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
    PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->bias, nchw, f32, 1, g.out_c, 1, 1));
  }
  // The conv's filter: K = its output channels (our input's), C = its input channels (filters).
  PSTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  PSTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, f32, nchw, g.in_c, g.out_c, g.kh, g.kw));
  PSTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  // Cross-correlation, as TensorFlow and our CPU kernels compute; plain FP32 FMA (no TF32), so
  // that the GPU matches the CPU within float error.
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, pad_h, pad_w, g.sh, g.sw, 1, 1,
                                                      CUDNN_CROSS_CORRELATION, f32));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH));
  int y_n = 0, y_c = 0, y_h = 0, y_w = 0;
  PSTRAIN_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(p->conv, p->conv_x, p->w, &y_n, &y_c, &y_h, &y_w));
  CHECK(y_h == g.in_h && y_w == g.in_w)
      << who << ": cuDNN's conv of " << x_h << "x" << x_w << " gives " << y_h << "x" << y_w
      << ", not the input's " << g.in_h << "x" << g.in_w;

  // The conv this layer transposes: conv_x convolved with w gives our input; our forward pass
  // is its backward-data pass, our input gradient its forward pass.
  p->algos = cuda::ChooseConvAlgorithms(gpu, {p->conv_x, p->w, p->conv, p->in},
                                        who + ": batch " + std::to_string(n));
  slot = p;
  return *slot;
}

}  // namespace worker
}  // namespace pstrain
