// tf.train.AdagradOptimizer, with the arithmetic in the order of TF's ApplyAdagrad kernel.
#include <cmath>
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class AdagradOptimizer : public internal::SquaringOptimizerWith<AdagradOptions> {
 public:
  using SquaringOptimizerWith::SquaringOptimizerWith;
  std::vector<std::string> slot_names() const override { return {"accumulator"}; }

 protected:
  float InitialSlotValue(const std::string& /*slot*/) const override {
    return options_.initial_accumulator_value;
  }

  void Update(float lr, int64_t /*global_step*/, int64_t n, const float* grad, const float* var,
              float* out, float* const* slots) const override {
    float* accum = slots[0];
    internal::ForEachElement(n, [&](int64_t i) {
      const float g = grad[i];
      const float a = accum[i] + g * g;
      accum[i] = a;
      out[i] = var[i] - g * lr * (1.0f / std::sqrt(a));
    });
  }
};

// The options as the config names them, with their bounds.
constexpr internal::OptionField<AdagradOptions> kFields[] = {
    // TF requires a positive start too: a zero accumulator divides by zero on a zero gradient.
    {"initial_accumulator_value", &AdagradOptions::initial_accumulator_value,
     internal::Bound::kPositive},
};

}  // namespace

PSTRAIN_OPTIMIZER_WITH_OPTIONS("adagrad", AdagradOptimizer, NewAdagradOptimizer, kFields);

}  // namespace pstrain::ps
