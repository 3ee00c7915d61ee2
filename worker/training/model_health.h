// Whether a trained model may be reported as done: every value finite. A run whose model went
// non-finite (a wild gradient, a bad batch, a hostile push) fails naming the variable instead of
// saving, exporting and printing "done" over it; TensorFlow's CheckNumerics does the same for
// one tensor inside the graph.
#pragma once

#include <vector>

#include "common/status.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

// OK when every element of every variable's host value is finite; otherwise FailedPrecondition
// naming the first such variable, how many of its elements are NaN or Inf, and the step.
Status CheckModelFinite(const std::vector<Variable*>& variables, int64_t step);

}  // namespace worker
}  // namespace pstrain
