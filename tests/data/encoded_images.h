// Images of known pixels as JPEG/PNG bytes, for the codec and encoded-TFRecord tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/data/image_codec.h"

namespace pstrain {
namespace testing_data {

// Smooth gradients (JPEG-friendly), different per image `i` and channel.
inline std::vector<uint8_t> Pixels(const ImageShape& s, int i) {
  std::vector<uint8_t> p(s.bytes());
  for (int64_t y = 0; y < s.height; ++y) {
    for (int64_t x = 0; x < s.width; ++x) {
      for (int64_t c = 0; c < s.depth; ++c) {
        p[(y * s.width + x) * s.depth + c] =
            static_cast<uint8_t>(20 + 4 * x + 3 * y + 30 * c + 5 * i);
      }
    }
  }
  return p;
}

inline std::string Png(const std::vector<uint8_t>& p, const ImageShape& s) {
  auto png = EncodePngPixels(p.data(), s);
  EXPECT_TRUE(png.ok()) << png.status().ToString();
  return png.ok() ? *png : "";
}

inline std::string Jpeg(const std::vector<uint8_t>& p, const ImageShape& s, int quality = 95) {
  auto jpeg = EncodeJpegPixels(p.data(), s, quality);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status().ToString();
  return jpeg.ok() ? *jpeg : "";
}
// The largest difference of any byte.
inline int MaxDiff(const std::string& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(static_cast<uint8_t>(a[i]) - static_cast<int>(b[i])));
  }
  return worst;
}
}  // namespace testing_data
}  // namespace pstrain
