// When an element-wise loop in ps/ is worth a thread team.
#pragma once

#include <cstdint>

namespace pstrain::ps {

// Below this many elements, starting OpenMP threads costs more than the loop itself
// (biases, batch-norm scales); such variables are updated on the calling thread.
constexpr int64_t kMinParallelElements = 32 * 1024;

}  // namespace pstrain::ps
