// JPEG (libjpeg-turbo) and PNG (libpng) bytes to and from uint8 HWC pixels: what TF's
// tf.io.decode_jpeg / decode_png do for the `image/encoded` feature of ImageNet, Flowers and
// TFDS TFRecords. Decoding never aborts on bad bytes: corrupt, truncated or oversized images
// are DataLoss errors that start with the caller's `where` (a file and record).
#pragma once

#include <cstdint>
#include <string>

#include "common/data/image_example.h"
#include "common/status.h"

namespace pstrain {

enum class ImageFormat { kUnknown, kJpeg, kPng };

// From the leading bytes (TF's decode_image does the same), not from `image/format`.
ImageFormat SniffImageFormat(const std::string& bytes);

// Larger images are refused before any pixel memory is allocated (a corrupt header can claim
// 65535 x 65535); 2^26 pixels is 8192 x 8192.
constexpr int64_t kMaxDecodedPixels = int64_t{1} << 26;

// Decodes JPEG or PNG bytes into `channels` (1: grayscale, 3: RGB) channels, converting as
// TF's decode_jpeg/decode_png(channels=...) do; alpha is dropped. On success *shape is the
// image's height x width x channels and *pixels holds shape->bytes() bytes.
Status DecodeImage(const std::string& bytes, int channels, const std::string& where,
                   ImageShape* shape, std::string* pixels);

// `pixels`: shape.bytes() bytes, height x width x depth, depth 1 or 3. For tests, the fuzz
// corpus and converters.
Result<std::string> EncodeJpegPixels(const uint8_t* pixels, const ImageShape& shape, int quality);
Result<std::string> EncodePngPixels(const uint8_t* pixels, const ImageShape& shape);

}  // namespace pstrain
