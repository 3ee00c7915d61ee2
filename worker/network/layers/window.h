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

// "SAME" or "VALID", as TensorFlow's padding attribute spells it.
const char* PaddingName(Padding padding);

// For ONNX, whose operators take explicit pads and floor the output size: an Internal error naming
// `who` and `axis` when that size differs from the window's own (a bug here, not in the config;
// it stops an export that would compute something else).
Status CheckExplicitPads(const std::string& who, const char* axis, int64_t in, int64_t window,
                         int64_t stride, const Window1D& w);

// Reads "SAME" or "VALID" from `key` (`fallback` when absent).
Result<Padding> ReadPadding(const ConfigNode& node, const std::string& key, Padding fallback);

// Reads a size given as one integer (square) or [h, w]; every entry must be >= 1.
Result<std::vector<int64_t>> ReadPair(const ConfigNode& node, const std::string& key,
                                      int64_t fallback);

}  // namespace worker
}  // namespace pstrain
