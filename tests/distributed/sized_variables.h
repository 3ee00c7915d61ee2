// Variables given by their size, for the tests of plans that cut a model's variables by bytes
// (the per-layer pulls, the push's parts): each a float32 variable laid out as rows of 1 KiB.
#pragma once

#include <cstdint>
#include <string>

#include "common/replication/sharding.h"

namespace pstrain {
namespace testing {

constexpr int64_t kMiB = int64_t{1} << 20;

// A float32 variable of `bytes` bytes (a multiple of 1 KiB).
inline replication::VariableSpec SizedVariable(const std::string& name, int64_t bytes) {
  return {name, Shape{bytes / 1024, 256}};
}

}  // namespace testing
}  // namespace pstrain
