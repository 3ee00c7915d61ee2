// tf.train.FtrlOptimizer (follow the regularised leader, proximal form), with the arithmetic in
// the order of TF's ApplyFtrl kernel (l2_shrinkage 0). It keeps a per-coordinate sum of squared
// gradients and a "linear" term; the weight is solved in closed form from them each step, so an
// l1 strength above |linear| gives exact zeros, which is why sparse linear models use it.
#include <cmath>
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class FtrlOptimizer : public internal::SquaringOptimizerWith<FtrlOptions> {
 public:
  using SquaringOptimizerWith::SquaringOptimizerWith;
  std::vector<std::string> slot_names() const override { return {"accumulator", "linear"}; }

 protected:
  float InitialSlotValue(const std::string& slot) const override {
    return slot == "accumulator" ? options_.initial_accumulator_value : 0.0f;
  }

  void Update(float lr, int64_t /*global_step*/, int64_t n, const float* grad, const float* var,
              float* out, float* const* slots) const override {
    float* accum = slots[0];
    float* linear = slots[1];
    const float l1 = options_.l1_regularization_strength;
    const float two_l2 = 2.0f * options_.l2_regularization_strength;
    const float power = -options_.learning_rate_power;
    const bool square_root = options_.learning_rate_power == -0.5f;  // TF's fast path
#pragma omp parallel for if (parallel : n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i];
      const float a = accum[i];
      const float a_new = a + g * g;
      const float a_new_pow = square_root ? std::sqrt(a_new) : std::pow(a_new, power);
      const float a_pow = square_root ? std::sqrt(a) : std::pow(a, power);
      const float l = linear[i] + g - (a_new_pow - a_pow) / lr * var[i];
      const float quadratic = a_new_pow / lr + two_l2;
      linear[i] = l;
      accum[i] = a_new;
      out[i] = std::fabs(l) > l1 ? (std::copysign(l1, l) - l) / quadratic : 0.0f;
    }
  }
};

// The options as the config names them, with their bounds.
constexpr internal::OptionField<FtrlOptions> kFields[] = {
    {"initial_accumulator_value", &FtrlOptions::initial_accumulator_value,
     internal::Bound::kPositive},
    {"l1_regularization_strength", &FtrlOptions::l1_regularization_strength,
     internal::Bound::kNonNegative},
    {"l2_regularization_strength", &FtrlOptions::l2_regularization_strength,
     internal::Bound::kNonNegative},
    {"learning_rate_power", &FtrlOptions::learning_rate_power, internal::Bound::kNonPositive},
};

}  // namespace

PSTRAIN_OPTIMIZER_WITH_OPTIONS("ftrl", FtrlOptimizer, NewFtrlOptimizer, kFields);

}  // namespace pstrain::ps
