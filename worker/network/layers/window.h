// Sliding-window geometry shared by convolution and pooling, with TensorFlow's padding rules:
//   SAME:  out = ceil(in / stride), pad = max((out - 1) * stride + window - in, 0),
//          pad_before = pad / 2, the rest after;
//   VALID: out = ceil((in - window + 1) / stride), no padding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace pstrain {
namespace worker {

enum class Padding { kSame, kValid };

struct Window1D {
  int64_t out = 0;
  int64_t pad_before = 0;
  int64_t pad_after = 0;
};

Result<Window1D> ComputeWindow(int64_t in, int64_t window, int64_t stride, Padding padding);

// Reads "SAME" or "VALID" from `key` (`fallback` when absent).
Result<Padding> ReadPadding(const ConfigNode& node, const std::string& key, Padding fallback);

// Reads a size given as one integer (square) or [h, w]; every entry must be >= 1.
Result<std::vector<int64_t>> ReadPair(const ConfigNode& node, const std::string& key,
                                      int64_t fallback);

}  // namespace worker
}  // namespace pstrain
