// tf.train.GradientDescentOptimizer: var -= lr * g.
#include <memory>

#include "ps/optimizers/optimizer_base.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

class SgdOptimizer : public Optimizer {
 public:
  const char* name() const override { return "sgd"; }
  std::vector<std::string> slot_names() const override { return {}; }

 protected:
  void Update(float lr, int64_t /*global_step*/, int64_t n, const float* grad, const float* var,
              float* out, float* const* /*slots*/) const override {
    internal::ForEachElement(n, [&](int64_t i) { out[i] = var[i] - lr * grad[i]; });
  }
};

}  // namespace

std::unique_ptr<Optimizer> NewSgdOptimizer() { return std::make_unique<SgdOptimizer>(); }

PSTRAIN_REGISTER_OPTIMIZER("sgd", [](const ConfigNode& node) -> Result<std::unique_ptr<Optimizer>> {
  RETURN_IF_ERROR(node.CheckKeys({"type"}));
  return NewSgdOptimizer();
});

}  // namespace pstrain::ps
