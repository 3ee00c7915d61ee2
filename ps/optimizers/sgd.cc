// tf.train.GradientDescentOptimizer: var -= lr * g.
#include <memory>

#include "ps/optimizers/optimizers.h"
#include "ps/parallel.h"

namespace pstrain::ps {
namespace {

class SgdOptimizer : public Optimizer {
 public:
  const char* name() const override { return "sgd"; }
  std::vector<std::string> slot_names() const override { return {}; }

 protected:
  void Update(float lr, int64_t /*global_step*/, int64_t n, const float* grad, const float* var,
              float* out, float* const* /*slots*/) const override {
#pragma omp parallel for simd if (parallel : n >= kMinParallelElements)
    for (int64_t i = 0; i < n; ++i) out[i] = var[i] - lr * grad[i];
  }
};

}  // namespace

std::unique_ptr<Optimizer> NewSgdOptimizer() { return std::make_unique<SgdOptimizer>(); }

namespace internal {

Result<std::unique_ptr<Optimizer>> SgdFromConfig(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"type"}));
  return NewSgdOptimizer();
}

}  // namespace internal
PSTRAIN_REGISTER_OPTIMIZER("sgd", internal::SgdFromConfig);

}  // namespace pstrain::ps
