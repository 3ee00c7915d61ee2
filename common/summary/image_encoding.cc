#include "common/summary/image_encoding.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace pstrain {

Result<std::string> EncodePng(const float* chw, int channels, int height, int width) {
  if (channels != 1 && channels != 3) {
    return InvalidArgument("image channels must be 1 (grayscale) or 3 (RGB), got " +
                           std::to_string(channels));
  }
  if (height <= 0 || width <= 0) {
    return InvalidArgument("image height and width must be positive, got " +
                           std::to_string(height) + "x" + std::to_string(width));
  }
  const int64_t plane = static_cast<int64_t>(height) * width;
  const int64_t total = plane * channels;
  float lo = 0, hi = 0;
  bool any = false;
  for (int64_t i = 0; i < total; ++i) {
    const float v = chw[i];
    if (!std::isfinite(v)) continue;
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
  const double scale = hi > lo ? 255.0 / (static_cast<double>(hi) - lo) : 0.0;

  // PNG wants interleaved rows (HWC); ours are planes (CHW).
  std::vector<uint8_t> hwc(static_cast<size_t>(total));
  for (int c = 0; c < channels; ++c) {
    const float* src = chw + c * plane;
    for (int64_t p = 0; p < plane; ++p) {
      const float v = src[p];
      const double scaled = std::isfinite(v) ? (v - lo) * scale : 0.0;
      hwc[p * channels + c] = static_cast<uint8_t>(std::clamp(std::lround(scaled), 0L, 255L));
    }
  }

  // libpng's simplified API reports errors through image.message instead of longjmp, which
  // would skip C++ destructors.
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, hwc.data(), 0, nullptr)) {
    return Internal(std::string("PNG encoding failed: ") + image.message);
  }
  std::string png(size, '\0');
  if (!png_image_write_to_memory(&image, png.data(), &size, 0, hwc.data(), 0, nullptr)) {
    return Internal(std::string("PNG encoding failed: ") + image.message);
  }
  png.resize(size);
  return png;
}

}  // namespace pstrain
