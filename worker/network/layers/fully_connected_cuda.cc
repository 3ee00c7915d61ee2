// Fully connected layer on the GPU with cuBLAS. cuBLAS is column-major: a row-major [r, c]
// matrix is its column-major [c, r] transpose, so each product below is the CPU's with the
// operands swapped (C^T = B^T A^T).
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/layers/fully_connected.h"

namespace pstrain {
namespace worker {

Status FullyConnected::GpuSupport() const { return Status::OK(); }

void FullyConnected::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                                const LayerContext& ctx) {
  CHECK(ctx.gpu) << Describe() << ": no GPU context";
  const int n = static_cast<int>(in[0]->dim(0));
  const int units = static_cast<int>(units_), features = static_cast<int>(features_);
  float beta = 0.0f;
  if (use_bias_) {
    cuda::BroadcastRows(variables()[1].device_value.data(), n, units, out->data(),
                        ctx.gpu->stream());
    beta = 1.0f;
  }
  const float one = 1.0f;
  // y[n, units] = x[n, features] W^T  <=>  y^T[units, n] = W[units, features] x^T
  PSTRAIN_CUBLAS_CHECK(cublasSgemm(ctx.gpu->cublas(), CUBLAS_OP_T, CUBLAS_OP_N, units, n, features,
                                   &one, variables()[0].device_value.data(), features,
                                   in[0]->data(), features, &beta, out->data(), units));
}

void FullyConnected::BackwardGpu(const std::vector<const Tensor*>& in, const Tensor&,
                                 const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                                 const LayerContext& ctx) {
  const int n = static_cast<int>(in[0]->dim(0));
  const int units = static_cast<int>(units_), features = static_cast<int>(features_);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = ctx.gpu->cublas();
  const float* dy = out_grad.data();
  // dW[units, features] = dy^T x  <=>  dW^T[features, units] = x^T dy
  PSTRAIN_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, features, units, n, &one,
                                   in[0]->data(), features, dy, units, &zero,
                                   variables()[0].device_grad.data(), features));
  if (use_bias_) {
    // db[units] = sum over rows of dy: dy^T (column-major [units, n]) times ones.
    PSTRAIN_CUBLAS_CHECK(cublasSgemv(h, CUBLAS_OP_N, units, n, &one, dy, units, ctx.gpu->Ones(n), 1,
                                     &zero, variables()[1].device_grad.data(), 1));
  }
  if (in_grads[0]) {
    // dx[n, features] = dy W  <=>  dx^T[features, n] = W^T dy^T
    PSTRAIN_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, features, n, units, &one,
                                     variables()[0].device_value.data(), features, dy, units, &zero,
                                     in_grads[0]->data(), features));
  }
}

}  // namespace worker
}  // namespace pstrain
