// What every optimizer with options shares, so that its file holds only its update rule and
// its fields: the options kept beside the rule, the check before one is made, and the loop over
// a variable's elements (on a thread team once the variable is large enough).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "ps/optimizer.h"
#include "ps/parallel.h"

namespace pstrain::ps::internal {

template <typename Options>
class OptimizerWith : public Optimizer {
 public:
  explicit OptimizerWith(const Options& options) : options_(options) {}

 protected:
  const Options options_;
};

// A `Made` over `options` once `valid` is OK; else `valid`, prefixed "<name> optimizer".
template <typename Made, typename Options>
Result<std::unique_ptr<Optimizer>> MakeIfValid(const char* name, const Options& options,
                                               const Status& valid) {
  RETURN_IF_ERROR(valid.WithContext(std::string(name) + " optimizer"));
  return std::unique_ptr<Optimizer>(new Made(options));
}

// body(i) for i in [0, n); the elements are independent, so the loop is also vectorised.
template <typename Body>
void ForEachElement(int64_t n, const Body& body) {
#pragma omp parallel for simd if (parallel : n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace pstrain::ps::internal
