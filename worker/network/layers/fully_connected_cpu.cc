// Fully connected layer on the CPU: three GEMMs through oneDNN's multi-threaded sgemm.
#include "worker/network/cpu/dnnl_context.h"
#include "worker/network/layers/fully_connected.h"

namespace pstrain {
namespace worker {

void FullyConnected::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                                const LayerContext&) {
  const int64_t n = in[0]->dim(0);
  float* y = out->data();
  float beta = 0.0f;
  if (use_bias_) {
    const float* b = bias_.data();
    for (int64_t i = 0; i < n; ++i) std::copy(b, b + units_, y + i * units_);
    beta = 1.0f;
  }
  // y[n, units] = x[n, features] * W^T
  cpu::Sgemm(false, true, n, units_, features_, 1.0f, in[0]->data(), features_, weights_.data(),
             features_, beta, y, units_);
}

void FullyConnected::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor&,
                                 const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                                 const LayerContext&) {
  const int64_t n = in[0]->dim(0);
  const float* dy = out_grad.data();
  // dW[units, features] = dy^T * x
  cpu::Sgemm(true, false, units_, features_, n, 1.0f, dy, units_, in[0]->data(), features_, 0.0f,
             weights_grad_.data(), features_);
  if (use_bias_) {
    float* db = bias_grad_.data();
    std::fill(db, db + units_, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = dy + i * units_;
#pragma omp simd
      for (int64_t j = 0; j < units_; ++j) db[j] += row[j];
    }
  }
  if (in_grads[0]) {
    // dx[n, features] = dy * W
    cpu::Sgemm(false, false, n, features_, units_, 1.0f, dy, units_, weights_.data(), features_,
               0.0f, in_grads[0]->data(), features_);
  }
}

}  // namespace worker
}  // namespace pstrain
