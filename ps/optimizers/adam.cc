// tf.train.AdamOptimizer, with the arithmetic in the order of TF's ApplyAdam kernel. The
// bias-corrected step size comes from the global step, so a restored run continues exactly.
#include <cmath>
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class AdamOptimizer : public internal::OptimizerWith<AdamOptions> {
 public:
  using OptimizerWith::OptimizerWith;
  const char* name() const override { return "adam"; }
  float gradient_bound() const override { return kSquaredGradientBound; }
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }

 protected:
  void Update(float lr, int64_t global_step, int64_t n, const float* grad, const float* var,
              float* out, float* const* slots) const override {
    float* m = slots[0];
    float* v = slots[1];
    // TF keeps beta^t in variables that start at beta and are multiplied after each update.
    const double t = static_cast<double>(global_step) + 1.0;
    const double beta1_power = std::pow(static_cast<double>(options_.beta1), t);
    const double beta2_power = std::pow(static_cast<double>(options_.beta2), t);
    const float alpha = static_cast<float>(lr * std::sqrt(1.0 - beta2_power) / (1.0 - beta1_power));
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

Status Validate(const AdamOptions& options) {
  RETURN_IF_ERROR(internal::CheckInUnitInterval("beta1", options.beta1));
  RETURN_IF_ERROR(internal::CheckInUnitInterval("beta2", options.beta2));
  return internal::CheckNonNegative("epsilon", options.epsilon);
}

}  // namespace

Result<std::unique_ptr<Optimizer>> NewAdamOptimizer(const AdamOptions& options) {
  return internal::MakeIfValid<AdamOptimizer>("adam", options, Validate(options));
}

namespace internal {

Result<std::unique_ptr<Optimizer>> AdamFromConfig(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"type", "beta1", "beta2", "epsilon"}));
  AdamOptions options;
  ASSIGN_OR_RETURN(options.beta1, GetFloat(node, "beta1", options.beta1));
  ASSIGN_OR_RETURN(options.beta2, GetFloat(node, "beta2", options.beta2));
  ASSIGN_OR_RETURN(options.epsilon, GetFloat(node, "epsilon", options.epsilon));
  RETURN_IF_ERROR(AtNode(node, Validate(options)));
  return NewAdamOptimizer(options);
}

}  // namespace internal
PSTRAIN_REGISTER_OPTIMIZER("adam", internal::AdamFromConfig);

}  // namespace pstrain::ps
