// tf.train.AdamOptimizer, with the arithmetic in the order of TF's ApplyAdam kernel. The
// bias-corrected step size comes from the global step, so a restored run continues exactly.
#include <cmath>
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class AdamOptimizer : public internal::SquaringOptimizerWith<AdamOptions> {
 public:
  using SquaringOptimizerWith::SquaringOptimizerWith;
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }

 protected:
  void Update(float lr, int64_t global_step, int64_t n, const float* grad, const float* var,
              float* out, float* const* slots) const override {
    float* m = slots[0];
    float* v = slots[1];
    // TF keeps beta^t in variables that start at beta and are multiplied after each update.
    const float alpha = AdamStepSize(options_, lr, global_step);
    const float one_minus_beta1 = 1.0f - options_.beta1;
    const float one_minus_beta2 = 1.0f - options_.beta2;
    const float epsilon = options_.epsilon;
    internal::ForEachElement(n, [&](int64_t i) {
      const float g = grad[i];
      const float mi = m[i] + (g - m[i]) * one_minus_beta1;
      const float vi = v[i] + (g * g - v[i]) * one_minus_beta2;
      m[i] = mi;
      v[i] = vi;
      out[i] = var[i] - (mi * alpha) / (std::sqrt(vi) + epsilon);
    });
  }
};

// The options as the config names them, with their bounds.
constexpr internal::OptionField<AdamOptions> kFields[] = {
    {"beta1", &AdamOptions::beta1, internal::Bound::kUnitInterval},
    {"beta2", &AdamOptions::beta2, internal::Bound::kUnitInterval},
    {"epsilon", &AdamOptions::epsilon, internal::Bound::kNonNegative},
};

}  // namespace

PSTRAIN_OPTIMIZER_WITH_OPTIONS("adam", AdamOptimizer, NewAdamOptimizer, kFields);

}  // namespace pstrain::ps
