#include "worker/training/input/preprocess.h"

#include <algorithm>
#include <cmath>

namespace pstrain {

Normalization ComputeNormalization(const ImageSet& set) {
  // A histogram per channel: exact sums and one pass of integer increments.
  const int64_t channels = set.channels;
  std::vector<int64_t> histogram(channels * 256, 0);
  const int64_t n = static_cast<int64_t>(set.pixels.size());
  for (int64_t i = 0; i < n; ++i) ++histogram[(i % channels) * 256 + set.pixels[i]];
  Normalization norm;
  for (int64_t c = 0; c < channels; ++c) {
    double count = 0, sum = 0, sum_sq = 0;
    for (int v = 0; v < 256; ++v) {
      const double h = static_cast<double>(histogram[c * 256 + v]);
      const double x = v / 255.0;
      count += h;
      sum += h * x;
      sum_sq += h * x * x;
    }
    const double mean = count > 0 ? sum / count : 0;
    const double var = count > 0 ? std::max(0.0, sum_sq / count - mean * mean) : 0;
    norm.mean.push_back(static_cast<float>(mean));
    norm.stddev.push_back(static_cast<float>(std::sqrt(var)));
  }
  return norm;
}

Result<ImagePreprocessor> ImagePreprocessor::Create(const ImageShape& shape,
                                                    const std::vector<float>& mean,
                                                    const std::vector<float>& stddev,
                                                    bool random_flip, int crop_padding) {
  const size_t depth = static_cast<size_t>(shape.depth);
  for (const auto* values : {&mean, &stddev}) {
    if (values->size() > 1 && values->size() != depth) {
      return InvalidArgument(std::string(values == &mean ? "mean" : "std") + " has " +
                             std::to_string(values->size()) + " values, expected 1 or " +
                             std::to_string(depth) + " (one per channel)");
    }
  }
  if (crop_padding < 0) return InvalidArgument("random_crop_padding must be >= 0");
  ImagePreprocessor p(shape, random_flip, crop_padding);
  p.table_.resize(depth * 256);
  for (size_t c = 0; c < depth; ++c) {
    const float m = mean.empty() ? 0.f : mean[mean.size() == 1 ? 0 : c];
    const float s = stddev.empty() ? 1.f : stddev[stddev.size() == 1 ? 0 : c];
    if (!(s > 0)) return InvalidArgument("std must be > 0, got " + std::to_string(s));
    for (int v = 0; v < 256; ++v) p.table_[c * 256 + v] = (v / 255.f - m) / s;
  }
  return p;
}

void ImagePreprocessor::Process(const uint8_t* pixels, float* out, std::mt19937_64* rng) const {
  const int64_t h = shape_.height, w = shape_.width, d = shape_.depth;
  if (!random_flip_ && crop_padding_ == 0 && d == 1) {
    const float* table = table_.data();
    for (int64_t i = 0; i < h * w; ++i) out[i] = table[pixels[i]];
    return;
  }
  // Output (y, x) reads input (y + dy, x' + dx) where x' is x or its mirror; outside the input
  // lies the zero padding.
  int64_t dy = 0, dx = 0;
  if (crop_padding_ > 0) {
    std::uniform_int_distribution<int64_t> offset(-crop_padding_, crop_padding_);
    dy = offset(*rng);
    dx = offset(*rng);
  }
  const bool flip = random_flip_ && std::bernoulli_distribution(0.5)(*rng);
  for (int64_t c = 0; c < d; ++c) {
    const float* table = table_.data() + c * 256;
    float* plane = out + c * h * w;
    for (int64_t y = 0; y < h; ++y) {
      float* row = plane + y * w;
      const int64_t sy = y + dy;
      if (sy < 0 || sy >= h) {
        for (int64_t x = 0; x < w; ++x) row[x] = table[0];
        continue;
      }
      const uint8_t* src = pixels + sy * w * d + c;
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sx = (flip ? w - 1 - x : x) + dx;
        row[x] = (sx < 0 || sx >= w) ? table[0] : table[src[sx * d]];
      }
    }
  }
}

}  // namespace pstrain
