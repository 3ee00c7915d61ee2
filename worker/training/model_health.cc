#include "worker/training/model_health.h"

#include <cmath>
#include <string>

namespace pstrain {
namespace worker {

Status CheckModelFinite(const std::vector<Variable*>& variables, int64_t step) {
  for (const Variable* v : variables) {
    int64_t bad = 0;
    for (int64_t i = 0; i < v->value.size(); ++i) bad += !std::isfinite(v->value[i]);
    if (bad > 0) {
      return FailedPrecondition(
          "the model went non-finite: '" + v->name + "' holds " + std::to_string(bad) +
          " NaN or Inf of " + std::to_string(v->value.size()) + " values at global step " +
          std::to_string(step) + "; the run is not done (nothing saved or exported)");
    }
  }
  return Status::OK();
}

}  // namespace worker
}  // namespace pstrain
