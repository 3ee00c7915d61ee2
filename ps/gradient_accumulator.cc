#include "ps/gradient_accumulator.h"

namespace pstrain {
namespace ps {

GradientAccumulator::GradientAccumulator(const Shape& shape, int required, int64_t max_staleness)
    : sum_(shape), required_(required), max_staleness_(max_staleness) {}

GradientAccumulator::Outcome GradientAccumulator::Add(const Tensor& grad, int64_t step,
                                                      int64_t version) {
  if (step < version - max_staleness_) {
    ++dropped_;
    return Outcome::kStale;
  }
  float* s = sum_.data();
  const float* g = grad.data();
  const int64_t n = sum_.size();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) s[i] += g[i];
  return ++count_ >= required_ ? Outcome::kReady : Outcome::kAccepted;
}

Tensor GradientAccumulator::TakeAverage() {
  Tensor mean = Tensor::Uninitialized(sum_.shape());
  const float scale = 1.0f / static_cast<float>(count_);
  float* m = mean.data();
  float* s = sum_.data();
  const int64_t n = sum_.size();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    m[i] = s[i] * scale;
    s[i] = 0.0f;
  }
  count_ = 0;
  return mean;
}

}  // namespace ps
}  // namespace pstrain
