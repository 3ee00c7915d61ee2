// Batch norm on the GPU with cuDNN (spatial mode over
// [N, C, H*W, 1], which is per feature for [N, F, 1, 1]); cuDNN's running averages are ours
// with factor = 1 - momentum, and it keeps the variance Bessel-corrected as the CPU layer does.
// The backward pass after an evaluation-mode forward pass (moving statistics as constants) has
// no cuDNN call, so it is our kernel.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/batch_norm.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

// One block per channel: reduce, then write dx.
__global__ void BatchNormBackwardMovingKernel(const float* x, const float* dy, const float* gamma,
                                              const float* mean, const float* var, float epsilon,
                                              int64_t n, int64_t channels, int64_t spatial,
                                              float* dx, float* dgamma, float* dbeta) {
  const int64_t c = blockIdx.x;
  const float inv = rsqrtf(var[c] + epsilon), m = mean[c];
  const int64_t count = n * spatial;
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t idx = ((e / spatial) * channels + c) * spatial + e % spatial;
    s1 += dy[idx];
    s2 += dy[idx] * (x[idx] - m) * inv;
  }
  __shared__ float sh1[kThreads], sh2[kThreads];
  sh1[threadIdx.x] = s1;
  sh2[threadIdx.x] = s2;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sh1[threadIdx.x] += sh1[threadIdx.x + stride];
      sh2[threadIdx.x] += sh2[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    dbeta[c] = sh1[0];
    dgamma[c] = sh2[0];
  }
  if (!dx) return;
  const float scale = gamma[c] * inv;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t idx = ((e / spatial) * channels + c) * spatial + e % spatial;
    dx[idx] = scale * dy[idx];
  }
}

// Batch norm's backward pass when the forward pass normalised with the moving statistics
// (constants): dgamma = sum(dy * xhat), dbeta = sum(dy), dx = dy * gamma / sqrt(var + eps).
// x and dy are [n, channels, spatial]; dx may be null.
void BatchNormBackwardWithMovingStats(const float* x, const float* dy, const float* gamma,
                                      const float* mean, const float* var, float epsilon, int64_t n,
                                      int64_t channels, int64_t spatial, float* dx, float* dgamma,
                                      float* dbeta, cudaStream_t s) {
  BatchNormBackwardMovingKernel<<<static_cast<unsigned>(channels), kThreads, 0, s>>>(
      x, dy, gamma, mean, var, epsilon, n, channels, spatial, dx, dgamma, dbeta);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace cuda

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

}  // namespace worker
}  // namespace pstrain
