// Batch norm and softmax cross-entropy on the GPU. Batch norm uses cuDNN (spatial mode over
// [N, C, H*W, 1], which is per feature for [N, F, 1, 1]); cuDNN's running averages are ours
// with factor = 1 - momentum, and it keeps the variance Bessel-corrected as the CPU layer does.
// The backward pass after an evaluation-mode forward pass (moving statistics as constants) has
// no cuDNN call, so it is our kernel; so is the loss.
#include "worker/network/layers/batch_norm.h"

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {

// Variable order, as Setup adds them.
enum BatchNormVariable { kGamma = 0, kBeta = 1, kMovingMean = 2, kMovingVar = 3 };

struct BatchNorm::GpuPlan {
  ~GpuPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (params) cudnnDestroyTensorDescriptor(params);
  }
  int64_t batch = -1;
  cudnnTensorDescriptor_t x = nullptr, params = nullptr;
  cuda::DeviceBuffer saved_mean, saved_inv_var, scratch_dx;
};

Status BatchNorm::GpuSupport() const {
  if (epsilon_ < CUDNN_BN_MIN_EPSILON) {
    return FailedPrecondition(Describe() + ": epsilon " + std::to_string(epsilon_) +
                              " is below cuDNN's minimum " + std::to_string(CUDNN_BN_MIN_EPSILON) +
                              " for batch norm on the GPU");
  }
  return Status::OK();
}

void BatchNorm::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                           const LayerContext& ctx) {
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  const int64_t n = in[0]->dim(0);
  if (!gpu_plan_ || gpu_plan_->batch != n) {
    auto p = std::make_shared<GpuPlan>();
    p->batch = n;
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n,
                                                   channels_, spatial_, 1));
    PSTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->params));
    PSTRAIN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p->params, p->x, CUDNN_BATCHNORM_SPATIAL));
    const size_t c_bytes = static_cast<size_t>(channels_) * sizeof(float);
    p->saved_mean = ctx.gpu->AllocateOrDie(c_bytes, Describe() + " saved mean");
    p->saved_inv_var = ctx.gpu->AllocateOrDie(c_bytes, Describe() + " saved inverse std");
    gpu_plan_ = p;
  }
  GpuPlan& p = *gpu_plan_;
  auto v = [&](int i) { return variables()[i].device_value.data(); };
  const float one = 1.0f, zero = 0.0f;
  used_batch_stats_ = ctx.training;
  if (ctx.training) {
    PSTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x, in[0]->data(), p.x,
        out->data(), p.params, v(kGamma), v(kBeta), 1.0 - momentum_, v(kMovingMean), v(kMovingVar),
        epsilon_, p.saved_mean.data(), p.saved_inv_var.data()));
  } else {
    PSTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
        ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x, in[0]->data(), p.x,
        out->data(), p.params, v(kGamma), v(kBeta), v(kMovingMean), v(kMovingVar), epsilon_));
  }
}

void BatchNorm::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor&,
                            const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                            const LayerContext& ctx) {
  CHECK(gpu_plan_ && gpu_plan_->batch == in[0]->dim(0))
      << Describe() << ": backward before forward";
  GpuPlan& p = *gpu_plan_;
  const int64_t n = in[0]->dim(0);
  auto v = [&](int i) { return variables()[i].device_value.data(); };
  auto g = [&](int i) { return variables()[i].device_grad.data(); };
  float* dx = in_grads[0] ? in_grads[0]->data() : nullptr;
  if (!used_batch_stats_) {
    cuda::BatchNormBackwardWithMovingStats(in[0]->data(), out_grad.data(), v(kGamma),
                                           v(kMovingMean), v(kMovingVar), epsilon_, n, channels_,
                                           spatial_, dx, g(kGamma), g(kBeta), ctx.gpu->stream());
    return;
  }
  if (!dx) {  // cuDNN always writes the input gradient
    const size_t bytes = static_cast<size_t>(in[0]->size()) * sizeof(float);
    if (p.scratch_dx.bytes() < bytes) {
      p.scratch_dx = ctx.gpu->AllocateOrDie(bytes, Describe() + " unused input gradient");
    }
    dx = p.scratch_dx.as<float>();
  }
  const float one = 1.0f, zero = 0.0f;
  PSTRAIN_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, p.x, in[0]->data(), p.x,
      out_grad.data(), p.x, dx, p.params, v(kGamma), g(kGamma), g(kBeta), epsilon_,
      p.saved_mean.data(), p.saved_inv_var.data()));
}

struct SoftmaxCrossEntropy::GpuPlan {
  int64_t batch = -1;
  cuda::DeviceBuffer probs;
};

Status SoftmaxCrossEntropy::GpuSupport() const { return Status::OK(); }

void SoftmaxCrossEntropy::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                                     const LayerContext& ctx) {
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  CHECK(ctx.device_labels) << Describe() << ": needs the labels in device memory";
  const int64_t n = in[0]->dim(0);
  if (!gpu_plan_ || gpu_plan_->batch != n) {
    auto p = std::make_shared<GpuPlan>();
    p->batch = n;
    p->probs = ctx.gpu->AllocateOrDie(static_cast<size_t>(n * classes_) * sizeof(float),
                                      Describe() + " probabilities");
    gpu_plan_ = p;
  }
  cuda::SoftmaxCrossEntropyForward(in[0]->data(), ctx.device_labels, n, classes_,
                                   gpu_plan_->probs.as<float>(), out->data(), ctx.gpu->stream());
}

void SoftmaxCrossEntropy::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor&,
                                      const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                                      const LayerContext& ctx) {
  if (!in_grads[0]) return;
  CHECK(gpu_plan_ && ctx.device_labels) << Describe() << ": backward before forward";
  cuda::SoftmaxCrossEntropyBackward(gpu_plan_->probs.as<float>(), ctx.device_labels,
                                    out_grad.data(), in[0]->dim(0), classes_, in_grads[0]->data(),
                                    ctx.gpu->stream());
}

}  // namespace worker
}  // namespace pstrain
