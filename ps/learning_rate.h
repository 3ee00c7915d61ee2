// Learning-rate schedules driven by the global step, with TensorFlow 1.x's semantics
// (tf.train.exponential_decay, tf.train.piecewise_constant). A schedule is a small value:
// copy it freely.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace pstrain::ps {

class LearningRateSchedule {
 public:
  // Reads the `learning_rate:` node; `schedule` is constant | exponential_decay |
  // piecewise_constant (default constant). Unknown fields and bad values are errors.
  static Result<LearningRateSchedule> FromConfig(const ConfigNode& learning_rate_node);

  // lr at every step; lr >= 0.
  static Result<LearningRateSchedule> Constant(double lr);
  // initial * decay_rate^(step / decay_steps), the exponent floored when `staircase`.
  // initial >= 0, decay_steps > 0, decay_rate > 0.
  static Result<LearningRateSchedule> ExponentialDecay(double initial, int64_t decay_steps,
                                                       double decay_rate, bool staircase);
  // values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <=
  // boundaries[i], values.back() after the last boundary. Boundaries strictly increase and
  // values.size() == boundaries.size() + 1.
  static Result<LearningRateSchedule> PiecewiseConstant(std::vector<int64_t> boundaries,
                                                        std::vector<double> values);

  // The learning rate for the update that follows `global_step` earlier updates.
  float At(int64_t global_step) const;

 private:
  enum class Kind { kConstant, kExponentialDecay, kPiecewiseConstant };
  LearningRateSchedule() = default;

  Kind kind_ = Kind::kConstant;
  double initial_ = 0.0;
  int64_t decay_steps_ = 1;
  double decay_rate_ = 1.0;
  bool staircase_ = false;
  std::vector<int64_t> boundaries_;
  std::vector<double> values_;
};

}  // namespace pstrain::ps
