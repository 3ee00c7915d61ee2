// JPEG/PNG decoding (common/data/image_codec.h) against pixels encoded here with libjpeg and
// libpng, and fitting decoded images to the model's size (image_fit.h).
#include "common/data/image_codec.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>

#include "tests/data/encoded_images.h"
#include "tests/data/test_images.h"
#include "worker/training/input/image_fit.h"

namespace pstrain {
namespace {

using testing_data::Contains;
using testing_data::Jpeg;
using testing_data::MaxDiff;
using testing_data::Pixels;
using testing_data::Png;

TEST(ImageCodecTest, PngRoundTripsExactlyInGrayAndRgb) {
  for (const ImageShape s : {ImageShape{7, 5, 1}, ImageShape{6, 9, 3}}) {
    const auto pixels = Pixels(s, 2);
    ImageShape got;
    std::string decoded;
    ASSERT_TRUE(DecodeImage(Png(pixels, s), s.depth, "w", &got, &decoded).ok());
    EXPECT_EQ(got, s);
    EXPECT_EQ(MaxDiff(decoded, pixels), 0) << s.ToString();
  }
}

TEST(ImageCodecTest, JpegAtQuality95IsWithinThreeLevels) {
  for (const ImageShape s : {ImageShape{16, 24, 1}, ImageShape{16, 16, 3}}) {
    const auto pixels = Pixels(s, 1);
    const std::string jpeg = Jpeg(pixels, s);
    EXPECT_EQ(SniffImageFormat(jpeg), ImageFormat::kJpeg);
    ImageShape got;
    std::string decoded;
    Status st = DecodeImage(jpeg, s.depth, "w", &got, &decoded);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(got, s);
    EXPECT_LE(MaxDiff(decoded, pixels), 3) << s.ToString();
  }
}

TEST(ImageCodecTest, GrayDecodesToRgbByReplicationAndRgbToGrayByLuma) {
  const ImageShape gray{4, 6, 1};
  const auto g = Pixels(gray, 0);
  ImageShape got;
  std::string rgb;
  for (const std::string& bytes : {Png(g, gray), Jpeg(g, gray, 100)}) {
    ASSERT_TRUE(DecodeImage(bytes, 3, "w", &got, &rgb).ok());
    EXPECT_EQ(got, (ImageShape{4, 6, 3}));
    std::vector<uint8_t> replicated;
    for (uint8_t v : g) replicated.insert(replicated.end(), {v, v, v});
    EXPECT_LE(MaxDiff(rgb, replicated), 2);
  }
  const ImageShape color{4, 6, 3};
  const auto c = Pixels(color, 0);
  std::string luma;
  ASSERT_TRUE(DecodeImage(Png(c, color), 1, "w", &got, &luma).ok());
  EXPECT_EQ(got, gray);
  std::vector<uint8_t> expected(gray.bytes());
  for (int64_t i = 0; i < gray.bytes(); ++i) {
    expected[i] = static_cast<uint8_t>(
        std::lround(0.299 * c[3 * i] + 0.587 * c[3 * i + 1] + 0.114 * c[3 * i + 2]));
  }
  EXPECT_LE(MaxDiff(luma, expected), 2);
}

TEST(ImageCodecTest, CorruptOrTruncatedBytesAreErrorsNamingTheRecordNeverCrashes) {
  const ImageShape s{16, 16, 3};
  const auto pixels = Pixels(s, 3);
  const std::string where = "train-00001-of-00004 at record offset 99 (record 7)";
  for (const std::string& good : {Jpeg(pixels, s), Png(pixels, s)}) {
    ImageShape got;
    std::string out;
    // Every truncation is an error (TF's decode_jpeg refuses truncated JPEGs too), except a PNG
    // cut only in its final 12-byte IEND chunk, whose pixels are all there.
    const size_t end = good.size() - (SniffImageFormat(good) == ImageFormat::kPng ? 12 : 0);
    for (size_t len = 0; len < end; len += 7) {
      Status st = DecodeImage(good.substr(0, len), 3, where, &got, &out);
      EXPECT_EQ(st.code(), StatusCode::kDataLoss) << len << " of " << good.size();
      EXPECT_EQ(st.message().rfind(where + ": ", 0), 0u) << st.message();
    }
    // Flipped bytes may still decode (entropy-coded data has no checksum); never a crash.
    for (size_t at = 0; at < good.size(); at += 3) {
      std::string bad = good;
      bad[at] ^= 0x5a;
      Status st = DecodeImage(bad, 3, where, &got, &out);
      if (!st.ok()) {
        EXPECT_EQ(st.message().rfind(where + ": ", 0), 0u) << st.message();
      }
    }
  }
  std::string out;
  ImageShape got;
  Status st = DecodeImage("GIF89a....", 3, where, &got, &out);
  EXPECT_TRUE(Contains(st.message(), where + ": encoded image is neither JPEG nor PNG"))
      << st.message();
}

TEST(ImageCodecTest, HugeDeclaredSizeIsRefusedBeforeAllocating) {
  const ImageShape s{1, 1, 1};
  std::string png = Png({7}, s);
  // IHDR's width and height at bytes 16..23, its CRC (over type and data) at 29..32.
  for (int i = 16; i < 24; ++i) png[i] = 0;
  png[18] = png[22] = '\xea';  // 60000 x 60000
  png[19] = png[23] = '\x60';
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(png.data() + 12), 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  ImageShape got;
  std::string out;
  Status st = DecodeImage(png, 1, "r", &got, &out);
  EXPECT_TRUE(Contains(st.message(), "r: PNG is 60000x60000, more than the")) << st.message();
}

TEST(ImageFitTest, BilinearHalvingAveragesEachTwoByTwoBlock) {
  const ImageShape from{4, 4, 1}, to{2, 2, 1};
  const std::vector<uint8_t> in = {0, 2, 10, 10, 4, 6, 10, 10, 50, 50, 7, 9, 50, 50, 11, 13};
  std::vector<uint8_t> out(to.bytes());
  ASSERT_TRUE(FitImage(in.data(), from, to, ResizeMethod::kBilinear, "r", out.data()).ok());
  EXPECT_EQ(out, (std::vector<uint8_t>{3, 10, 50, 10}));
}

TEST(ImageFitTest, CenterCropKeepsTheCentralBoxOfTheModelsAspect) {
  const ImageShape from{2, 6, 1}, to{2, 2, 1};
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16};
  std::vector<uint8_t> out(to.bytes());
  ASSERT_TRUE(FitImage(in.data(), from, to, ResizeMethod::kCenterCrop, "r", out.data()).ok());
  EXPECT_EQ(out, (std::vector<uint8_t>{3, 4, 13, 14}));
}
}  // namespace
}  // namespace pstrain
