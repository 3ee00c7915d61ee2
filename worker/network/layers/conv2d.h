// 2-D convolution over NCHW inputs, weights [filters, in_channels, kh, kw], optional bias: the
// conv of conv_base.h itself.
#pragma once

#include <string>

#include "worker/network/layers/conv_base.h"

namespace pstrain {
namespace worker {

class Conv2D : public ConvBase {
 public:
  Conv2D() : ConvBase(/*transposed=*/false) {}
  Status Configure(const ConfigNode& node) override { return ConfigureConv(node, {}); }
  PSTRAIN_DECLARE_CONV_LAYER()
};

}  // namespace worker
}  // namespace pstrain
