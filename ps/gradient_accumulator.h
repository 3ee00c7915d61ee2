// Sums the gradients pushed for one variable until `required` have arrived, then hands out
// their average once (TensorFlow's ConditionalAccumulator). A gradient computed from a version
// older than the accumulator's by more than `max_staleness` is dropped and counted.
#pragma once

#include <cstdint>

#include "common/tensor.h"

namespace pstrain {
namespace ps {

class GradientAccumulator {
 public:
  enum class Outcome { kAccepted, kReady, kStale };

  GradientAccumulator(const Shape& shape, int required, int64_t max_staleness);

  // `step` is the version the gradient was computed from, `version` the variable's current
  // one. kReady means `required` gradients are in: call TakeAverage().
  Outcome Add(const Tensor& grad, int64_t step, int64_t version);
  // The mean of the accumulated gradients; resets the accumulator.
  Tensor TakeAverage();

  int count() const { return count_; }
  const Shape& shape() const { return sum_.shape(); }
  int64_t dropped() const { return dropped_; }

 private:
  Tensor sum_;
  int required_;
  int64_t max_staleness_;
  int count_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace ps
}  // namespace pstrain
