// Pooling on the GPU: cuDNN when the padding is symmetric (VALID, or SAME with an even total),
// our own kernels for TensorFlow's asymmetric SAME (cuDNN pads both sides alike, and padding
// the input explicitly would change average pooling's divisor).
#include "worker/network/layers/pool2d.h"

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {

struct Pool2D::GpuPlan {
  ~GpuPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
  bool use_cudnn = false;
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
  p->use_cudnn = wh_.pad_before == wh_.pad_after && ww_.pad_before == ww_.pad_after;
  if (p->use_cudnn) {
    const auto f32 = CUDNN_DATA_FLOAT;
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    PSTRAIN_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, f32, n, c_, in_h_, in_w_));
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
        static_cast<int>(size_[1]), static_cast<int>(wh_.pad_before),
        static_cast<int>(ww_.pad_before), static_cast<int>(stride_[0]),
        static_cast<int>(stride_[1])));
    int on = 0, oc = 0, oh = 0, ow = 0;
    PSTRAIN_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &on, &oc, &oh, &ow));
    // cuDNN rounds the output size down; our windows may end in the padding (SAME): then the
    // own kernels, which follow TensorFlow's rule.
    if (oh != wh_.out || ow != ww_.out) p->use_cudnn = false;
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
  if (!p.use_cudnn) {
    cuda::PoolBackward(in[0]->data(), out_grad.data(), p.geometry, in_grads[0]->data(),
                       ctx.gpu->stream());
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  PSTRAIN_CUDNN_CHECK(cudnnPoolingBackward(ctx.gpu->cudnn(), p.pool, &one, p.y, out.data(), p.y,
                                           out_grad.data(), p.x, in[0]->data(), &zero, p.x,
                                           in_grads[0]->data()));
}

}  // namespace worker
}  // namespace pstrain
