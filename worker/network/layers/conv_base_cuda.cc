// ConvBase on the GPU with cuDNN: the conv's descriptors and algorithms (cuDNN's heuristics, the
// first FP32 one, cuda/conv_algorithm.h) are chosen once per batch size and cached; the workspace
// is the GPU context's, shared by every layer. cuDNN pads symmetrically only; TensorFlow's SAME
// puts the odd pixel after, so then the conv's x is padded explicitly (zeros) and convolved
// without padding, and what is computed into a padded x is cropped back.
#include <string>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/conv_algorithm.h"
#include "worker/network/cuda/conv_graph.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/layers/conv_base.h"

namespace pstrain {
namespace worker {

struct ConvBase::GpuPlan {
  ~GpuPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (out) cudnnDestroyTensorDescriptor(out);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  // x: the conv's input inside its padding; y: the conv's output; out: our output (the bias').
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, out = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // The workspace is taken from the context's shared one when run.
  cuda::ConvAlgorithms algos;
  bool explicit_pad = false;
  cuda::PaddedPlanes pad{};
  // Only with explicit_pad: x as read (PaddedX) and as written before its crop (ConvolveYToX).
  cuda::DeviceBuffer padded_x, padded_x_out;
};

const float* ConvBase::PaddedX(GpuPlan& p, const float* x, const LayerContext& ctx) {
  if (!p.explicit_pad) return x;
  cuda::Pad(x, p.pad, 0.0f, p.padded_x.as<float>(), ctx.gpu->stream());
  return p.padded_x.as<float>();
}

void ConvBase::ConvolveXToY(GpuPlan& p, const float* padded_x, float* y, const LayerContext& ctx) {
  const float one = 1.0f, zero = 0.0f;
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  const float* w = variables()[0].device_value.data();
  if (p.algos.forward_graph &&
      p.algos.forward_graph->Run(ctx.gpu->cudnn(), padded_x, w, y, workspace)) {
    return;
  }
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
      ctx.gpu->cudnn(), &one, p.x, padded_x, p.w, variables()[0].device_value.data(), p.conv,
      p.algos.forward, workspace, p.algos.workspace_bytes, &zero, p.y, y));
}

void ConvBase::ConvolveYToX(GpuPlan& p, const float* y, float* x, const LayerContext& ctx) {
  const float one = 1.0f, zero = 0.0f;
  float* into = p.explicit_pad ? p.padded_x_out.as<float>() : x;
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  const float* w = variables()[0].device_value.data();
  if (!p.algos.backward_data_graph ||
      !p.algos.backward_data_graph->Run(ctx.gpu->cudnn(), into, w, y, workspace)) {
    PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.gpu->cudnn(), &one, p.w, w, p.y, y, p.conv,
                                                     p.algos.backward_data, workspace,
                                                     p.algos.workspace_bytes, &zero, p.x, into));
  }
  if (p.explicit_pad) cuda::Crop(into, p.pad, x, ctx.gpu->stream());
}

void ConvBase::WeightsGradient(GpuPlan& p, const float* padded_x, const float* y,
                               const LayerContext& ctx) {
  const float one = 1.0f, zero = 0.0f;
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  float* dw = variables()[0].device_grad.data();
  if (p.algos.backward_filter_graph &&
      p.algos.backward_filter_graph->Run(ctx.gpu->cudnn(), padded_x, dw, y, workspace)) {
    return;
  }
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      ctx.gpu->cudnn(), &one, p.x, padded_x, p.y, y, p.conv, p.algos.backward_filter, workspace,
      p.algos.workspace_bytes, &zero, p.w, variables()[0].device_grad.data()));
}

void ConvBase::AddBias(GpuPlan& p, float* out, const LayerContext& ctx) {
  if (!use_bias_) return;
  const float one = 1.0f;
  PSTRAIN_CUDNN_CHECK(cudnnAddTensor(ctx.gpu->cudnn(), &one, p.bias,
                                     variables()[1].device_value.data(), &one, p.out, out));
}

void ConvBase::BiasGradient(GpuPlan& p, const float* out_grad, const LayerContext& ctx) {
  if (!use_bias_) return;
  const float one = 1.0f, zero = 0.0f;
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx.gpu->cudnn(), &one, p.out, out_grad, &zero,
                                                   p.bias, variables()[1].device_grad.data()));
}

Status ConvBase::GpuSupport() const { return Status::OK(); }

void ConvBase::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                          const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  if (transposed_) {  // our output is the conv's x: its input gradient of our input
    ConvolveYToX(p, in[0]->data(), out->data(), ctx);
  } else {
    ConvolveXToY(p, PaddedX(p, in[0]->data(), ctx), out->data(), ctx);
  }
  AddBias(p, out->data(), ctx);
}

void ConvBase::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                           const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                           const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  // The conv's x and y: our input and our output's gradient, or the reverse when transposed.
  const float* x = transposed_ ? out_grad.data() : in[0]->data();
  const float* y = transposed_ ? in[0]->data() : out_grad.data();
  // Padded again: another forward pass (evaluation) may have overwritten the buffer. When
  // transposed, the padding's gradient is dropped: zeros.
  const float* padded_x = PaddedX(p, x, ctx);
  WeightsGradient(p, padded_x, y, ctx);
  BiasGradient(p, out_grad.data(), ctx);
  if (!in_grads[0]) return;
  if (transposed_) {
    ConvolveXToY(p, padded_x, in_grads[0]->data(), ctx);
  } else {
    ConvolveYToX(p, y, in_grads[0]->data(), ctx);
  }
}

ConvBase::GpuPlan& ConvBase::GetGpuPlan(int64_t n, const LayerContext& ctx) {
  auto& slot = gpu_plans_[n];
  if (slot) return *slot;
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  cuda::GpuContext* gpu = ctx.gpu;
  const Geometry& g = g_;
  const std::string who = Describe();
  auto p = std::make_shared<GpuPlan>();
  // The conv's sides: x is our input (conv2d) or our output (conv2d_transpose).
  const int64_t x_c = conv_x_channels(), y_c = conv_y_channels();
  const int64_t unpadded_x_h = transposed_ ? g.out_h : g.in_h;
  const int64_t unpadded_x_w = transposed_ ? g.out_w : g.in_w;
  const int64_t y_h = transposed_ ? g.in_h : g.out_h, y_w = transposed_ ? g.in_w : g.out_w;
  p->explicit_pad = g.wh.pad_before != g.wh.pad_after || g.ww.pad_before != g.ww.pad_after;
  int64_t x_h = unpadded_x_h, x_w = unpadded_x_w, pad_h = g.wh.pad_before, pad_w = g.ww.pad_before;
  if (p->explicit_pad) {
    p->pad = {n * x_c,
              unpadded_x_h,
              unpadded_x_w,
              g.wh.pad_before,
              g.ww.pad_before,
              unpadded_x_h + g.wh.pad_before + g.wh.pad_after,
              unpadded_x_w + g.ww.pad_before + g.ww.pad_after};
    x_h = p->pad.padded_h;
    x_w = p->pad.padded_w;
    pad_h = pad_w = 0;
    const size_t bytes = static_cast<size_t>(n * x_c * x_h * x_w) * sizeof(float);
    p->padded_x = gpu->AllocateOrDie(
        bytes, who + (transposed_ ? " padded output gradient" : " padded input"));
    p->padded_x_out = gpu->AllocateOrDie(
        bytes, who + (transposed_ ? " padded output" : " padded input gradient"));
  }
  const auto f32 = CUDNN_DATA_FLOAT;
  const auto nchw = CUDNN_TENSOR_NCHW;
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, nchw, f32, n, x_c, x_h, x_w));
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, nchw, f32, n, y_c, y_h, y_w));
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->out));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->out, nchw, f32, n, g.out_c, g.out_h, g.out_w));
  if (use_bias_) {
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
    PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->bias, nchw, f32, 1, g.out_c, 1, 1));
  }
  // The conv's filter, K = y's channels and C = x's: our weights as they are.
  PSTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  PSTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, f32, nchw, y_c, x_c, g.kh, g.kw));
  PSTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  // Cross-correlation, as TensorFlow and our CPU kernels compute; plain FP32 FMA (no TF32 tensor
  // cores), so that the GPU matches the CPU within float error, unless TF32 is allowed
  // (cuDNN's default math then uses it, as PyTorch's allow_tf32 does).
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, pad_h, pad_w, g.sh, g.sw, 1, 1,
                                                      CUDNN_CROSS_CORRELATION, f32));
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(
      p->conv, gpu->options().allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  int out_n = 0, out_c = 0, out_h = 0, out_w = 0;
  PSTRAIN_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &out_n, &out_c, &out_h, &out_w));
  CHECK(out_h == y_h && out_w == y_w)
      << who << ": cuDNN's conv of " << x_h << "x" << x_w << " gives " << out_h << "x" << out_w
      << ", not " << y_h << "x" << y_w;

  p->algos = cuda::ChooseConvAlgorithms(gpu, {p->x, p->w, p->conv, p->y},
                                        who + ": batch " + std::to_string(n));
  slot = p;
  return *slot;
}

}  // namespace worker
}  // namespace pstrain
