// Softmax cross-entropy on the GPU: our kernels, one thread per example forward.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/softmax_cross_entropy.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

__global__ void SoftmaxXentForwardKernel(const float* z, const int32_t* labels, int64_t n,
                                         int64_t k, float* probs, float* loss) {
  PSTRAIN_FOR_EACH(i, n) {
    const float* row = z + i * k;
    float mx = row[0];
    for (int64_t j = 1; j < k; ++j) mx = fmaxf(mx, row[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(row[j] - mx));
    const double log_sum = log(sum);
    for (int64_t j = 0; j < k; ++j) {
      probs[i * k + j] = static_cast<float>(exp(row[j] - mx - log_sum));
    }
    loss[i] = static_cast<float>(log_sum - (row[labels[i]] - mx));
  }
}

__global__ void SoftmaxXentBackwardKernel(const float* probs, const int32_t* labels,
                                          const float* dloss, int64_t n, int64_t k, float* dz) {
  PSTRAIN_FOR_EACH(e, n * k) {
    const int64_t i = e / k, j = e % k;
    dz[e] = dloss[i] * (probs[e] - (j == labels[i] ? 1.0f : 0.0f));
  }
}

// Per example: probs = softmax(z), loss = -log probs[label]. Labels must be in [0, k).
void SoftmaxCrossEntropyForward(const float* z, const int32_t* labels, int64_t n, int64_t k,
                                float* probs, float* loss, cudaStream_t s) {
  SoftmaxXentForwardKernel<<<Blocks(n), kThreads, 0, s>>>(z, labels, n, k, probs, loss);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

// dz = dloss[i] * (probs - onehot(label))
void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, const float* dloss,
                                 int64_t n, int64_t k, float* dz, cudaStream_t s) {
  SoftmaxXentBackwardKernel<<<Blocks(n * k), kThreads, 0, s>>>(probs, labels, dloss, n, k, dz);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace cuda

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
