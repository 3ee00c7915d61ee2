// tf.train.MomentumOptimizer, with the arithmetic in the order of TF's ApplyMomentum kernel.
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class MomentumOptimizer : public internal::OptimizerWith<MomentumOptions> {
 public:
  using OptimizerWith::OptimizerWith;
  std::vector<std::string> slot_names() const override { return {"momentum"}; }

 protected:
  void Update(float lr, int64_t /*global_step*/, int64_t n, const float* grad, const float* var,
              float* out, float* const* slots) const override {
    float* accum = slots[0];
    const float momentum = options_.momentum;
    if (options_.nesterov) {
      internal::ForEachElement(n, [&](int64_t i) {
        const float a = accum[i] * momentum + grad[i];
        accum[i] = a;
        out[i] = var[i] - (grad[i] * lr + a * momentum * lr);
      });
    } else {
      internal::ForEachElement(n, [&](int64_t i) {
        const float a = accum[i] * momentum + grad[i];
        accum[i] = a;
        out[i] = var[i] - a * lr;
      });
    }
  }
};

// The options as the config names them, with their bounds.
constexpr internal::OptionField<MomentumOptions> kFields[] = {
    {"momentum", &MomentumOptions::momentum, internal::Bound::kUnitInterval},
    {"nesterov", &MomentumOptions::nesterov},
};

}  // namespace

PSTRAIN_OPTIMIZER_WITH_OPTIONS("momentum", MomentumOptimizer, NewMomentumOptimizer, kFields);

}  // namespace pstrain::ps
