// Turns uint8 HWC images into normalised float CHW, with TF-style random flip and
// pad-and-crop augmentation.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/data/idx.h"
#include "common/data/image_example.h"
#include "common/status.h"

namespace pstrain {

// Per-channel mean and standard deviation of x/255 (x the uint8 pixel values).
struct Normalization {
  std::vector<float> mean;
  std::vector<float> stddev;
};
// Over all pixels of `set` (use the training set, for training and evaluation alike).
Normalization ComputeNormalization(const ImageSet& set);

class ImagePreprocessor {
 public:
  // `mean`/`stddev`: empty (x/255 only), one value for all channels, or one per channel.
  static Result<ImagePreprocessor> Create(const ImageShape& shape, const std::vector<float>& mean,
                                          const std::vector<float>& stddev, bool random_flip,
                                          int crop_padding);

  // Writes shape.bytes() floats to `out` (depth x height x width). `rng` draws the flip and
  // the crop offset; it is not used when neither is on.
  void Process(const uint8_t* pixels, float* out, std::mt19937_64* rng) const;

  const ImageShape& shape() const { return shape_; }

 private:
  ImagePreprocessor(const ImageShape& shape, bool random_flip, int crop_padding)
      : shape_(shape), random_flip_(random_flip), crop_padding_(crop_padding) {}

  ImageShape shape_;
  bool random_flip_;
  int crop_padding_;
  // (x/255 - mean[c]) / stddev[c] for every uint8 x: one lookup per pixel in the hot loop.
  std::vector<float> table_;  // depth x 256
};

}  // namespace pstrain
