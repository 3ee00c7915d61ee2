// tf.train.RMSPropOptimizer, with the arithmetic in the order of TF's ApplyRMSProp and
// ApplyCenteredRMSProp kernels.
#include <cmath>
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class RMSPropOptimizer : public internal::SquaringOptimizerWith<RMSPropOptions> {
 public:
  using SquaringOptimizerWith::SquaringOptimizerWith;
  std::vector<std::string> slot_names() const override {
    if (options_.centered) return {"ms", "mom", "mg"};
    return {"ms", "mom"};
  }

 protected:
  // TF 1.x starts the mean square at 1 (Keras' RMSprop starts at 0); the first steps differ.
  float InitialSlotValue(const std::string& slot) const override {
    return slot == "ms" ? 1.0f : 0.0f;
  }

  void Update(float lr, int64_t /*global_step*/, int64_t n, const float* grad, const float* var,
              float* out, float* const* slots) const override {
    float* ms = slots[0];
    float* mom = slots[1];
    const float one_minus_decay = 1.0f - options_.decay;
    const float momentum = options_.momentum;
    const float epsilon = options_.epsilon;
    if (options_.centered) {
      float* mg = slots[2];
      internal::ForEachElement(n, [&](int64_t i) {
        const float g = grad[i];
        const float msi = ms[i] + (g * g - ms[i]) * one_minus_decay;
        const float mgi = mg[i] + (g - mg[i]) * one_minus_decay;
        const float denom = (msi - mgi * mgi) + epsilon;
        const float momi = mom[i] * momentum + (g * lr) * (1.0f / std::sqrt(denom));
        ms[i] = msi;
        mg[i] = mgi;
        mom[i] = momi;
        out[i] = var[i] - momi;
      });
    } else {
      internal::ForEachElement(n, [&](int64_t i) {
        const float g = grad[i];
        const float msi = ms[i] + (g * g - ms[i]) * one_minus_decay;
        const float momi = mom[i] * momentum + (g * lr) / std::sqrt(msi + epsilon);
        ms[i] = msi;
        mom[i] = momi;
        out[i] = var[i] - momi;
      });
    }
  }
};

// The options as the config names them, with their bounds.
constexpr internal::OptionField<RMSPropOptions> kFields[] = {
    {"decay", &RMSPropOptions::decay, internal::Bound::kUnitInterval},
    {"momentum", &RMSPropOptions::momentum, internal::Bound::kUnitInterval},
    {"epsilon", &RMSPropOptions::epsilon, internal::Bound::kNonNegative},
    {"centered", &RMSPropOptions::centered},
};

}  // namespace

PSTRAIN_OPTIMIZER_WITH_OPTIONS("rmsprop", RMSPropOptimizer, NewRMSPropOptimizer, kFields);

}  // namespace pstrain::ps
