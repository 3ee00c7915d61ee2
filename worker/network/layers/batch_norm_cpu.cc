// Batch norm and softmax cross-entropy on the CPU. Statistics accumulate in double so that
// 100K values per channel do not lose precision; channels are split across cores.
#include <cmath>

#include "worker/network/layers/batch_norm.h"

namespace pstrain {
namespace worker {

void BatchNorm::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                           const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0), C = channels_, S = spatial_;
  const float* x = in[0]->data();
  float* y = out->data();
  mean_.resize(C);
  inv_std_.resize(C);
  used_batch_stats_ = ctx.training;
  const int64_t count = n * S;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    float mean, var;
    if (ctx.training) {
      double sum = 0.0, sq = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * C + c) * S;
        double s1 = 0.0, s2 = 0.0;
#pragma omp simd reduction(+ : s1, s2)
        for (int64_t k = 0; k < S; ++k) {
          s1 += p[k];
          s2 += static_cast<double>(p[k]) * p[k];
        }
        sum += s1;
        sq += s2;
      }
      const double m = sum / count;
      const double v = std::max(sq / count - m * m, 0.0);
      mean = static_cast<float>(m);
      var = static_cast<float>(v);
      const double unbiased = count > 1 ? v * count / (count - 1) : v;
      moving_mean_[c] = momentum_ * moving_mean_[c] + (1.0f - momentum_) * mean;
      moving_var_[c] =
          momentum_ * moving_var_[c] + (1.0f - momentum_) * static_cast<float>(unbiased);
    } else {
      mean = moving_mean_[c];
      var = moving_var_[c];
    }
    const float inv = 1.0f / std::sqrt(var + epsilon_);
    mean_[c] = mean;
    inv_std_[c] = inv;
    const float scale = gamma_[c] * inv, shift = beta_[c] - mean * scale;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * C + c) * S;
      float* q = y + (i * C + c) * S;
#pragma omp simd
      for (int64_t k = 0; k < S; ++k) q[k] = p[k] * scale + shift;
    }
  }
}

void BatchNorm::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor&,
                            const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                            const LayerContext&) {
  const int64_t n = in[0]->dim(0), C = channels_, S = spatial_;
  const float* x = in[0]->data();
  const float* dy = out_grad.data();
  float* dx = in_grads[0] ? in_grads[0]->data() : nullptr;
  const double count = static_cast<double>(n * S);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const float mean = mean_[c], inv = inv_std_[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * C + c) * S;
      const float* g = dy + (i * C + c) * S;
      double s1 = 0.0, s2 = 0.0;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t k = 0; k < S; ++k) {
        s1 += g[k];
        s2 += g[k] * (p[k] - mean) * inv;
      }
      sum_dy += s1;
      sum_dy_xhat += s2;
    }
    gamma_grad_[c] = static_cast<float>(sum_dy_xhat);
    beta_grad_[c] = static_cast<float>(sum_dy);
    if (!dx) continue;
    const float scale = gamma_[c] * inv;
    // With batch statistics the mean and variance depend on x too; with moving ones they don't.
    const float a = used_batch_stats_ ? static_cast<float>(sum_dy / count) : 0.0f;
    const float b = used_batch_stats_ ? static_cast<float>(sum_dy_xhat / count) : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * C + c) * S;
      const float* g = dy + (i * C + c) * S;
      float* q = dx + (i * C + c) * S;
#pragma omp simd
      for (int64_t k = 0; k < S; ++k) q[k] = scale * (g[k] - a - (p[k] - mean) * inv * b);
    }
  }
}

}  // namespace worker
}  // namespace pstrain
