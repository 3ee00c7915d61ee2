#include "worker/training/input/preprocess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tests/data/test_images.h"

namespace pstrain {
namespace {

using testing_data::MakeImageSet;

ImagePreprocessor MustCreate(const ImageShape& shape, std::vector<float> mean,
                             std::vector<float> stddev, bool flip, int padding) {
  auto p = ImagePreprocessor::Create(shape, mean, stddev, flip, padding);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

std::vector<float> Apply(const ImagePreprocessor& p, const std::vector<uint8_t>& pixels,
                         uint64_t seed = 1) {
  std::vector<float> out(pixels.size());
  std::mt19937_64 rng(seed);
  p.Process(pixels.data(), out.data(), &rng);
  return out;
}

std::vector<uint8_t> Ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 3 + 1);
  return v;
}

TEST(PreprocessTest, NormalisesToXOver255MinusMeanOverStd) {
  const ImageShape shape{2, 3, 1};
  std::vector<uint8_t> pixels = {0, 51, 102, 153, 204, 255};
  std::vector<float> out = Apply(MustCreate(shape, {0.5f}, {0.25f}, false, 0), pixels);
  for (size_t i = 0; i < pixels.size(); ++i) {
    EXPECT_NEAR(out[i], (pixels[i] / 255.0 - 0.5) / 0.25, 1e-6) << i;
  }
  // No mean/std: just x/255.
  out = Apply(MustCreate(shape, {}, {}, false, 0), pixels);
  EXPECT_FLOAT_EQ(out[5], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.2f);
}

TEST(PreprocessTest, ConvertsHwcToChwWithPerChannelStatistics) {
  const ImageShape shape{1, 2, 3};  // two pixels of three channels
  std::vector<uint8_t> pixels = {255, 0, 51, 0, 255, 102};
  std::vector<float> out =
      Apply(MustCreate(shape, {0, 0.5f, 0}, {1, 0.5f, 0.2f}, false, 0), pixels);
  // Planes: R = {1, 0}, G = {(0-.5)/.5, (1-.5)/.5}, B = {.2/.2, .4/.2}.
  std::vector<float> expected = {1, 0, -1, 1, 1, 2};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out[i], expected[i], 1e-6) << i;
  EXPECT_FALSE(ImagePreprocessor::Create(shape, {0, 0}, {}, false, 0).ok());
}

TEST(PreprocessTest, CropWithZeroPaddingIsTheIdentity) {
  for (const ImageShape& shape : {ImageShape{5, 6, 1}, ImageShape{5, 6, 2}}) {
    std::vector<uint8_t> pixels = Ramp(shape.bytes());
    for (uint64_t seed = 0; seed < 5; ++seed) {
      std::vector<float> out = Apply(MustCreate(shape, {0.3f}, {0.2f}, false, 0), pixels, seed);
      for (int64_t c = 0; c < shape.depth; ++c) {
        for (int64_t i = 0; i < shape.height * shape.width; ++i) {
          const float want = (pixels[i * shape.depth + c] / 255.f - 0.3f) / 0.2f;
          ASSERT_NEAR(out[c * shape.height * shape.width + i], want, 1e-5);
        }
      }
    }
  }
}

TEST(PreprocessTest, FlipMirrorsEachRowAndHappensAboutHalfTheTime) {
  const ImageShape shape{3, 4, 1};
  std::vector<uint8_t> pixels = Ramp(12);
  auto none = MustCreate(shape, {}, {}, false, 0);
  auto flip = MustCreate(shape, {}, {}, true, 0);
  std::vector<float> original = Apply(none, pixels);
  std::vector<float> mirrored(12);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) mirrored[y * 4 + x] = original[y * 4 + 3 - x];
  }
  int flipped = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> out = Apply(flip, pixels, seed);
    ASSERT_TRUE(out == original || out == mirrored) << "seed " << seed;
    flipped += out == mirrored;
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
}

TEST(PreprocessTest, CropWithPaddingShiftsTheImageAndFillsWithZeroPixels) {
  const ImageShape shape{6, 7, 1};
  const int kPad = 2;
  std::vector<uint8_t> pixels = Ramp(shape.bytes());
  auto crop = MustCreate(shape, {0.5f}, {0.5f}, false, kPad);
  const float zero = (0 - 0.5f) / 0.5f;  // a padding pixel after normalisation
  std::set<std::pair<int, int>> offsets;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::vector<float> out = Apply(crop, pixels, seed);
    ASSERT_EQ(out.size(), static_cast<size_t>(shape.bytes()));
    // Exactly one offset (dy, dx) in [-P, P]^2 explains every output pixel.
    int matches = 0;
    for (int dy = -kPad; dy <= kPad; ++dy) {
      for (int dx = -kPad; dx <= kPad; ++dx) {
        bool all = true;
        for (int y = 0; y < 6 && all; ++y) {
          for (int x = 0; x < 7 && all; ++x) {
            const int sy = y + dy, sx = x + dx;
            const bool inside = sy >= 0 && sy < 6 && sx >= 0 && sx < 7;
            const float want = inside ? (pixels[sy * 7 + sx] / 255.f - 0.5f) / 0.5f : zero;
            all = std::fabs(out[y * 7 + x] - want) < 1e-6;
          }
        }
        if (all) {
          ++matches;
          offsets.insert({dy, dx});
        }
      }
    }
    ASSERT_EQ(matches, 1) << "seed " << seed;
  }
  EXPECT_EQ(offsets.size(), 25u) << "every offset in [-2, 2]^2 should occur";
}

TEST(PreprocessTest, ComputedNormalizationMatchesADirectSum) {
  ImageSet set = MakeImageSet(50, 4, 3, 2);
  Normalization n = ComputeNormalization(set);
  ASSERT_EQ(n.mean.size(), 2u);
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sum_sq = 0, count = 0;
    for (size_t i = c; i < set.pixels.size(); i += 2) {
      const double x = set.pixels[i] / 255.0;
      sum += x;
      sum_sq += x * x;
      ++count;
    }
    const double mean = sum / count;
    EXPECT_NEAR(n.mean[c], mean, 1e-6);
    EXPECT_NEAR(n.stddev[c], std::sqrt(sum_sq / count - mean * mean), 1e-6);
  }
}

TEST(PreprocessTest, FashionMnistTrainingSetStatistics) {
  if (!testing_data::HaveFashionMnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << testing_data::kFashionMnistDir;
  }
  auto set = LoadFashionMnist(testing_data::kFashionMnistDir, Split::kTrain);
  ASSERT_TRUE(set.ok());
  Normalization n = ComputeNormalization(*set);
  // The published values (e.g. torchvision examples): mean 0.2860, std 0.3530.
  EXPECT_NEAR(n.mean[0], 0.2860, 5e-4);
  EXPECT_NEAR(n.stddev[0], 0.3530, 5e-4);
}

}  // namespace
}  // namespace pstrain
