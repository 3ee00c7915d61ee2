// Conv2D on the GPU with cuDNN: descriptors and algorithms are chosen once per batch size
// (cuDNN's heuristics, cuda/conv_algorithm.h) and cached; the workspace is the GPU
// context's, shared by every layer. cuDNN pads symmetrically only; TensorFlow's SAME puts the odd
// pixel after, so such inputs are padded explicitly (zeros) and convolved without padding, and the
// input gradient is cropped back.
#include <string>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/conv_algorithm.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/layers/conv2d.h"

namespace pstrain {
namespace worker {

struct Conv2D::GpuPlan {
  ~GpuPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // The workspace is taken from the context's shared one when run.
  cuda::ConvAlgorithms algos;
  bool explicit_pad = false;
  cuda::PaddedPlanes pad{};
  cuda::DeviceBuffer padded_x, padded_dx;  // only with explicit_pad
};

Status Conv2D::GpuSupport() const { return Status::OK(); }

void Conv2D::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                        const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  cudaStream_t stream = ctx.gpu->stream();
  const float* x = in[0]->data();
  if (p.explicit_pad) {
    cuda::Pad(x, p.pad, 0.0f, p.padded_x.as<float>(), stream);
    x = p.padded_x.as<float>();
  }
  const float one = 1.0f, zero = 0.0f;
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionForward(
      ctx.gpu->cudnn(), &one, p.x, x, p.w, variables()[0].device_value.data(), p.conv,
      p.algos.forward, workspace, p.algos.workspace_bytes, &zero, p.y, out->data()));
  if (use_bias_) {
    PSTRAIN_CUDNN_CHECK(cudnnAddTensor(ctx.gpu->cudnn(), &one, p.bias,
                                       variables()[1].device_value.data(), &one, p.y, out->data()));
  }
}

void Conv2D::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                         const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                         const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  cudaStream_t stream = ctx.gpu->stream();
  cudnnHandle_t h = ctx.gpu->cudnn();
  const float one = 1.0f, zero = 0.0f;
  const float* x = in[0]->data();
  if (p.explicit_pad) {  // again: another forward pass (evaluation) may have overwritten it
    cuda::Pad(x, p.pad, 0.0f, p.padded_x.as<float>(), stream);
    x = p.padded_x.as<float>();
  }
  void* workspace = ctx.gpu->Workspace(p.algos.workspace_bytes, Describe());
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      h, &one, p.x, x, p.y, out_grad.data(), p.conv, p.algos.backward_filter, workspace,
      p.algos.workspace_bytes, &zero, p.w, variables()[0].device_grad.data()));
  if (use_bias_) {
    PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, p.y, out_grad.data(), &zero, p.bias,
                                                     variables()[1].device_grad.data()));
  }
  if (!in_grads[0]) return;
  float* dx = p.explicit_pad ? p.padded_dx.as<float>() : in_grads[0]->data();
  PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
      h, &one, p.w, variables()[0].device_value.data(), p.y, out_grad.data(), p.conv,
      p.algos.backward_data, workspace, p.algos.workspace_bytes, &zero, p.x, dx));
  if (p.explicit_pad) cuda::Crop(dx, p.pad, in_grads[0]->data(), stream);
}

Conv2D::GpuPlan& Conv2D::GetGpuPlan(int64_t n, const LayerContext& ctx) {
  auto& slot = gpu_plans_[n];
  if (slot) return *slot;
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  cuda::GpuContext* gpu = ctx.gpu;
  const Geometry& g = g_;
  const bool use_bias = use_bias_;
  const std::string who = Describe();
  auto p = std::make_shared<GpuPlan>();
  const bool symmetric = g.wh.pad_before == g.wh.pad_after && g.ww.pad_before == g.ww.pad_after;
  p->explicit_pad = !symmetric;
  int64_t in_h = g.in_h, in_w = g.in_w, pad_h = g.wh.pad_before, pad_w = g.ww.pad_before;
  if (p->explicit_pad) {
    p->pad = {n * g.in_c,
              g.in_h,
              g.in_w,
              g.wh.pad_before,
              g.ww.pad_before,
              g.in_h + g.wh.pad_before + g.wh.pad_after,
              g.in_w + g.ww.pad_before + g.ww.pad_after};
    in_h = p->pad.padded_h;
    in_w = p->pad.padded_w;
    pad_h = pad_w = 0;
    const size_t bytes = static_cast<size_t>(n * g.in_c * in_h * in_w) * sizeof(float);
    p->padded_x = gpu->AllocateOrDie(bytes, who + " padded input");
    p->padded_dx = gpu->AllocateOrDie(bytes, who + " padded input gradient");
  }
  const auto f32 = CUDNN_DATA_FLOAT;
  const auto nchw = CUDNN_TENSOR_NCHW;
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, nchw, f32, n, g.in_c, in_h, in_w));
  PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, nchw, f32, n, g.out_c, g.out_h, g.out_w));
  if (use_bias) {
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
    PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->bias, nchw, f32, 1, g.out_c, 1, 1));
  }
  PSTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  PSTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, f32, nchw, g.out_c, g.in_c, g.kh, g.kw));
  PSTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  // Cross-correlation, as TensorFlow and our CPU kernels compute.
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, pad_h, pad_w, g.sh, g.sw, 1, 1,
                                                      CUDNN_CROSS_CORRELATION, f32));
  // Plain FP32 FMA (no TF32 tensor cores), so that the GPU matches the CPU within float error.
  PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH));
  int out_n = 0, out_c = 0, out_h = 0, out_w = 0;
  PSTRAIN_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &out_n, &out_c, &out_h, &out_w));
  CHECK(out_h == g.out_h && out_w == g.out_w) << who << ": cuDNN's output " << out_h << "x" << out_w
                                              << " differs from " << g.out_h << "x" << g.out_w;

  p->algos = cuda::ChooseConvAlgorithms(gpu, {p->x, p->w, p->conv, p->y},
                                        who + ": batch " + std::to_string(n));
  slot = p;
  return *slot;
}

}  // namespace worker
}  // namespace pstrain
