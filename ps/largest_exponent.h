// The largest float exponent among a tensor's elements: one integer pass over the bits that
// both refuses NaN and Inf (exponent 0xff) and bounds every |element|, which the magnitude guard
// (ps/magnitude_guard.h) reads. Dense pushes (ps/variable_store.cc) and row pushes
// (ps/table_shard.cc) both take it.
#pragma once

#include <cstdint>

#include "common/tensor.h"

namespace pstrain::ps {

// The biased IEEE 754 exponent field of t's largest element: 0 for all zeros, 0xff when some
// element is NaN or Inf.
uint32_t LargestExponent(const Tensor& t);

}  // namespace pstrain::ps
