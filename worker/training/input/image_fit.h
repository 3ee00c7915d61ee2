// Brings a decoded image to the model's input size: TF's tf.image.resize (bilinear,
// half-pixel centres, no antialiasing) of the whole image, or of its largest central box with
// the model's aspect ratio (tf.image.central_crop, then resize). Runs on the prefetch threads.
#pragma once

#include <cstdint>
#include <string>

#include "common/data/image_example.h"
#include "common/status.h"

namespace pstrain {

enum class ResizeMethod {
  kNone,        // the image must already be the model's size
  kBilinear,    // stretch the whole image
  kCenterCrop,  // keep the aspect ratio: crop the central box, then resize
};

// "none", "bilinear", "center_crop"; InvalidArgument listing them for anything else.
Result<ResizeMethod> ParseResizeMethod(const std::string& name);

// `from` and `to` have the same depth. Writes to.bytes() bytes to `out`. With kNone and
// different sizes: InvalidArgument naming `where` and both sizes.
Status FitImage(const uint8_t* pixels, const ImageShape& from, const ImageShape& to,
                ResizeMethod method, const std::string& where, uint8_t* out);

}  // namespace pstrain
