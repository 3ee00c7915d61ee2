// Pooling on the GPU: cuDNN when the padding is symmetric (VALID, or SAME with an even total);
// for TensorFlow's asymmetric SAME (cuDNN pads both sides alike) our own kernels. Max pooling's
// backward pass there first records each window's maximum, then each input pixel gathers the
// gradients of the windows whose maximum it is (ResNet's stem pool: 1.65 ms per backward on an
// H200 through an explicit -FLT_MAX border and cuDNN).
#include <cfloat>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/pool2d.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

// Pooling over planes [planes, h, w] with TensorFlow's windows (pad_top/pad_left before, the
// rest after); average pooling divides by the real pixels in each window, max pooling routes
// the gradient to the first maximum of each window.
struct PoolGeometry {
  int64_t planes, h, w, out_h, out_w, kh, kw, sh, sw, pad_top, pad_left;
  bool max;
};

// The first maximum of output (oh, ow)'s window in row-major order, as a plane offset, with
// indices of type I: 32-bit arithmetic where the sizes allow (64-bit division and remainder cost
// several times more than the loads here).
template <typename I>
__device__ I ArgMaxOf(const float* plane, const PoolGeometry& g, I oh, I ow) {
  const I h = static_cast<I>(g.h), w = static_cast<I>(g.w);
  const I h0 = oh * static_cast<I>(g.sh) - static_cast<I>(g.pad_top);
  const I w0 = ow * static_cast<I>(g.sw) - static_cast<I>(g.pad_left);
  const I h1 = min(h0 + static_cast<I>(g.kh), h), w1 = min(w0 + static_cast<I>(g.kw), w);
  I best = -1;
  float best_v = -FLT_MAX;
  for (I ih = max(h0, I{0}); ih < h1; ++ih) {
    for (I iw = max(w0, I{0}); iw < w1; ++iw) {
      const float v = plane[ih * w + iw];
      if (best < 0 || v > best_v) {
        best = ih * w + iw;
        best_v = v;
      }
    }
  }
  return best;
}

__device__ int64_t RealPixels(const PoolGeometry& g, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
  const int64_t rows = min(h0 + g.kh, g.h) - max(h0, int64_t{0});
  const int64_t cols = min(w0 + g.kw, g.w) - max(w0, int64_t{0});
  return rows * cols;
}

__global__ void PoolForwardKernel(const float* x, PoolGeometry g, float* y) {
  PSTRAIN_FOR_EACH(e, g.planes * g.out_h * g.out_w) {
    const int64_t ow = e % g.out_w, oh = (e / g.out_w) % g.out_h, plane = e / (g.out_w * g.out_h);
    const float* p = x + plane * g.h * g.w;
    if (g.max) {
      y[e] = p[ArgMaxOf<int64_t>(p, g, oh, ow)];
      continue;
    }
    const int64_t h0 = oh * g.sh - g.pad_top, w0 = ow * g.sw - g.pad_left;
    float sum = 0.0f;
    for (int64_t ih = max(h0, int64_t{0}); ih < min(h0 + g.kh, g.h); ++ih) {
      for (int64_t iw = max(w0, int64_t{0}); iw < min(w0 + g.kw, g.w); ++iw)
        sum += p[ih * g.w + iw];
    }
    y[e] = sum / static_cast<float>(RealPixels(g, oh, ow));
  }
}

// Average pooling's backward pass: one thread per input pixel gathers from the outputs whose
// windows hold it (no atomics).
__global__ void AvgPoolBackwardKernel(const float* dy, PoolGeometry g, float* dx) {
  PSTRAIN_FOR_EACH(e, g.planes * g.h * g.w) {
    const int64_t iw = e % g.w, ih = (e / g.w) % g.h, plane = e / (g.w * g.h);
    const float* d = dy + plane * g.out_h * g.out_w;
    // Outputs o with o * s - pad <= i < o * s - pad + k.
    const int64_t oh0 = max(int64_t{0}, (ih + g.pad_top - g.kh + g.sh) / g.sh);
    const int64_t oh1 = min(g.out_h - 1, (ih + g.pad_top) / g.sh);
    const int64_t ow0 = max(int64_t{0}, (iw + g.pad_left - g.kw + g.sw) / g.sw);
    const int64_t ow1 = min(g.out_w - 1, (iw + g.pad_left) / g.sw);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        sum += d[oh * g.out_w + ow] / static_cast<float>(RealPixels(g, oh, ow));
      }
    }
    dx[e] = sum;
  }
}

// argmax[o] = the plane offset of output o's window maximum (the first in row-major order).
template <typename I>
__global__ void MaxPoolArgMaxKernel(const float* x, PoolGeometry g, int32_t* argmax) {
  const I out_h = static_cast<I>(g.out_h), out_w = static_cast<I>(g.out_w);
  const I count = static_cast<I>(g.planes) * out_h * out_w;
  PSTRAIN_FOR_EACH_AS(I, e, count) {
    const I ow = e % out_w, rest = e / out_w, oh = rest % out_h, plane = rest / out_h;
    argmax[e] = static_cast<int32_t>(ArgMaxOf<I>(x + plane * static_cast<I>(g.h * g.w), g, oh, ow));
  }
}

// One thread per input pixel sums, in a fixed order, the gradients of the outputs whose
// recorded maximum it is.
template <typename I>
__global__ void MaxPoolGatherKernel(const int32_t* argmax, const float* dy, PoolGeometry g,
                                    float* dx) {
  const I h = static_cast<I>(g.h), w = static_cast<I>(g.w);
  const I out_h = static_cast<I>(g.out_h), out_w = static_cast<I>(g.out_w);
  const I kh = static_cast<I>(g.kh), kw = static_cast<I>(g.kw);
  const I sh = static_cast<I>(g.sh), sw = static_cast<I>(g.sw);
  const I pad_top = static_cast<I>(g.pad_top), pad_left = static_cast<I>(g.pad_left);
  const I count = static_cast<I>(g.planes) * h * w;
  PSTRAIN_FOR_EACH_AS(I, e, count) {
    const I iw = e % w, rest = e / w, ih = rest % h, plane = rest / h;
    const int32_t* a = argmax + plane * out_h * out_w;
    const float* d = dy + plane * out_h * out_w;
    const I oh0 = max(I{0}, (ih + pad_top - kh + sh) / sh);
    const I oh1 = min(out_h - 1, (ih + pad_top) / sh);
    const I ow0 = max(I{0}, (iw + pad_left - kw + sw) / sw);
    const I ow1 = min(out_w - 1, (iw + pad_left) / sw);
    const int32_t self = static_cast<int32_t>(ih * w + iw);
    float sum = 0.0f;
    for (I oh = oh0; oh <= oh1; ++oh) {
      for (I ow = ow0; ow <= ow1; ++ow) {
        if (a[oh * out_w + ow] == self) sum += d[oh * out_w + ow];
      }
    }
    dx[e] = sum;
  }
}

template <typename I>
void MaxPoolBackwardWith(const float* x, const float* dy, const PoolGeometry& g, int32_t* argmax,
                         float* dx, cudaStream_t s) {
  MaxPoolArgMaxKernel<I><<<Blocks(g.planes * g.out_h * g.out_w), kThreads, 0, s>>>(x, g, argmax);
  PSTRAIN_CUDA_CHECK_LAUNCH();
  MaxPoolGatherKernel<I><<<Blocks(g.planes * g.h * g.w), kThreads, 0, s>>>(argmax, dy, g, dx);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

// Max pooling's backward pass through recorded maxima; `argmax` holds one int per output.
void MaxPoolBackward(const float* x, const float* dy, const PoolGeometry& g, int32_t* argmax,
                     float* dx, cudaStream_t s) {
  if (Fits32(g.planes * g.h * g.w)) {
    MaxPoolBackwardWith<int32_t>(x, dy, g, argmax, dx, s);
  } else {
    MaxPoolBackwardWith<int64_t>(x, dy, g, argmax, dx, s);
  }
}

void PoolForward(const float* x, const PoolGeometry& g, float* y, cudaStream_t s) {
  PoolForwardKernel<<<Blocks(g.planes * g.out_h * g.out_w), kThreads, 0, s>>>(x, g, y);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

void AvgPoolBackward(const float* dy, const PoolGeometry& g, float* dx, cudaStream_t s) {
  AvgPoolBackwardKernel<<<Blocks(g.planes * g.h * g.w), kThreads, 0, s>>>(dy, g, dx);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace cuda

struct Pool2D::GpuPlan {
  ~GpuPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
  bool use_cudnn = false;
  // Max pooling on our kernels: each output's window maximum, recorded by the backward pass.
  cuda::DeviceBuffer argmax;
  cuda::PoolGeometry geometry{};
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
};

Status Pool2D::GpuSupport() const { return Status::OK(); }

Pool2D::GpuPlan& Pool2D::GetGpuPlan(int64_t n, const LayerContext& ctx) {
  auto& slot = gpu_plans_[n];
  if (slot) return *slot;
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  auto p = std::make_shared<GpuPlan>();
  p->geometry = {n * c_,     in_h_,          in_w_,          wh_.out,
                 ww_.out,    size_[0],       size_[1],       stride_[0],
                 stride_[1], wh_.pad_before, ww_.pad_before, kind_ == Kind::kMax};
  const bool symmetric = wh_.pad_before == wh_.pad_after && ww_.pad_before == ww_.pad_after;
  p->use_cudnn = symmetric;
  const int64_t x_h = in_h_, x_w = in_w_, pad_h = wh_.pad_before, pad_w = ww_.pad_before;
  if (p->use_cudnn) {
    const auto f32 = CUDNN_DATA_FLOAT;
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, f32, n, c_, x_h, x_w));
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    PSTRAIN_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, f32, n, c_, wh_.out, ww_.out));
    PSTRAIN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&p->pool));
    // Average pooling leaves the padding out of the divisor, as TensorFlow's SAME does.
    // Deterministic max pooling: overlapping windows' gradients add up in a fixed order.
    const cudnnPoolingMode_t mode = kind_ == Kind::kMax
                                        ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    PSTRAIN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        p->pool, mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(size_[0]),
        static_cast<int>(size_[1]), static_cast<int>(pad_h), static_cast<int>(pad_w),
        static_cast<int>(stride_[0]), static_cast<int>(stride_[1])));
    int on = 0, oc = 0, oh = 0, ow = 0;
    PSTRAIN_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &on, &oc, &oh, &ow));
    // cuDNN rounds the output size down; our windows may end in the padding (SAME): then the
    // own kernels, which follow TensorFlow's rule.
    if (oh != wh_.out || ow != ww_.out) p->use_cudnn = false;
  }
  if (!p->use_cudnn && kind_ == Kind::kMax) {
    // Plane offsets as int32: a plane holds far fewer than 2^31 pixels (kMaxExampleElements).
    const size_t outputs = static_cast<size_t>(n * c_ * wh_.out * ww_.out);
    p->argmax = ctx.gpu->AllocateOrDie(outputs * sizeof(int32_t), Describe() + " window maxima");
  }
  slot = p;
  return *slot;
}

void Pool2D::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                        const LayerContext& ctx) {
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  if (!p.use_cudnn) {
    cuda::PoolForward(in[0]->data(), p.geometry, out->data(), ctx.gpu->stream());
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  PSTRAIN_CUDNN_CHECK(cudnnPoolingForward(ctx.gpu->cudnn(), p.pool, &one, p.x, in[0]->data(), &zero,
                                          p.y, out->data()));
}

void Pool2D::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor& out,
                         const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                         const LayerContext& ctx) {
  if (!in_grads[0]) return;
  GpuPlan& p = GetGpuPlan(in[0]->dim(0), ctx);
  if (!p.use_cudnn && kind_ == Kind::kMax) {
    cuda::MaxPoolBackward(in[0]->data(), out_grad.data(), p.geometry, p.argmax.as<int32_t>(),
                          in_grads[0]->data(), ctx.gpu->stream());
    return;
  }
  if (!p.use_cudnn) {
    cuda::AvgPoolBackward(out_grad.data(), p.geometry, in_grads[0]->data(), ctx.gpu->stream());
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  PSTRAIN_CUDNN_CHECK(cudnnPoolingBackward(ctx.gpu->cudnn(), p.pool, &one, p.y, out.data(), p.y,
                                           out_grad.data(), p.x, in[0]->data(), &zero, p.x,
                                           in_grads[0]->data()));
}

}  // namespace worker
}  // namespace pstrain
