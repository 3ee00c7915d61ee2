// PNG encoding of float images for TensorBoard's image dashboard.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace pstrain {

// Encodes one CHW float image (channels 1: grayscale, 3: RGB) as an 8-bit PNG. Values are
// min-max scaled to 0..255 over the whole image (all channels together), so that activations
// and weights of any range are visible; a constant image becomes all 0, and NaN/Inf pixels
// become 0 and do not take part in the min and max.
Result<std::string> EncodePng(const float* chw, int channels, int height, int width);

}  // namespace pstrain
