// Batch norm and softmax cross-entropy on the CPU. Statistics accumulate in double so that
// 100K values per channel do not lose precision; channels are split across cores.
#include <cmath>

#include "worker/network/layers/softmax_cross_entropy.h"

namespace pstrain {
namespace worker {

void SoftmaxCrossEntropy::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                                     const LayerContext& ctx) {
  const int64_t n = in[0]->dim(0), K = classes_;
  CHECK(ctx.labels != nullptr) << Describe() << ": needs labels";
  CHECK_EQ(static_cast<int64_t>(ctx.labels->size()), n) << Describe() << ": labels vs batch";
  labels_ = *ctx.labels;
  probs_.resize(n * K);
  const float* z = in[0]->data();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels_[i];
    CHECK(label >= 0 && label < K) << Describe() << ": label " << label << " of example " << i
                                   << " is outside [0, " << K << ")";
    const float* row = z + i * K;
    float mx = row[0];
    for (int64_t k = 1; k < K; ++k) mx = std::max(mx, row[k]);
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(static_cast<double>(row[k] - mx));
    const double log_sum = std::log(sum);
    for (int64_t k = 0; k < K; ++k) {
      probs_[i * K + k] = static_cast<float>(std::exp(row[k] - mx - log_sum));
    }
    (*out)[i] = static_cast<float>(log_sum - (row[label] - mx));
  }
}

void SoftmaxCrossEntropy::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor&,
                                      const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                                      const LayerContext&) {
  if (!in_grads[0]) return;
  const int64_t n = in[0]->dim(0), K = classes_;
  float* dz = in_grads[0]->data();
  for (int64_t i = 0; i < n; ++i) {
    const float g = out_grad[i];
    for (int64_t k = 0; k < K; ++k) {
      dz[i * K + k] = g * (probs_[i * K + k] - (k == labels_[i] ? 1.0f : 0.0f));
    }
  }
}

}  // namespace worker
}  // namespace pstrain
