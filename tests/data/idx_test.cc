#include "common/data/idx.h"

#include <gtest/gtest.h>

#include "tests/data/test_images.h"

namespace pstrain {
namespace {

using testing_data::Contains;
using testing_data::IdxHeader;
using testing_data::MakeImageSet;
using testing_data::TestDir;
using testing_data::WriteFile;
using testing_data::WriteIdx;

TEST(IdxTest, ReadsFashionMnistTrainAndTestSplits) {
  if (!testing_data::HaveFashionMnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << testing_data::kFashionMnistDir;
  }
  for (auto [split, count] : {std::pair{Split::kTrain, 60000}, std::pair{Split::kTest, 10000}}) {
    auto set = LoadFashionMnist(testing_data::kFashionMnistDir, split);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->count, count);
    EXPECT_EQ(set->height, 28);
    EXPECT_EQ(set->width, 28);
    EXPECT_EQ(set->channels, 1);
    EXPECT_EQ(set->pixels.size(), static_cast<size_t>(count) * 784);
    // Fashion-MNIST is balanced: every class 0..9 has a tenth of the examples.
    std::vector<int> per_class(10, 0);
    for (int32_t l : set->labels) {
      ASSERT_GE(l, 0);
      ASSERT_LE(l, 9);
      ++per_class[l];
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], count / 10) << "class " << c;
  }
}

TEST(IdxTest, ReadsGzipAndPlainFilesAlike) {
  const std::string dir = TestDir();
  ImageSet original = MakeImageSet(7, 3, 4);
  for (int i = 0; i < 7; ++i) original.labels[i] = i % 3;
  WriteIdx(original, dir, "gz", /*gzip=*/true);
  WriteIdx(original, dir, "plain", /*gzip=*/false);
  for (std::string name : {"gz-images-idx3-ubyte.gz", "plain-images-idx3-ubyte"}) {
    std::string labels = name;
    labels.replace(labels.find("images-idx3"), 11, "labels-idx1");
    auto set = ReadIdx(dir + "/" + name, dir + "/" + labels);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->count, 7);
    EXPECT_EQ(set->height, 3);
    EXPECT_EQ(set->width, 4);
    EXPECT_EQ(set->pixels, original.pixels);
    EXPECT_EQ(set->labels, original.labels);
  }
}

TEST(IdxTest, LoadFashionMnistFindsUncompressedFiles) {
  const std::string dir = TestDir();
  ImageSet original = MakeImageSet(5, 28, 28);
  for (int i = 0; i < 5; ++i) original.labels[i] = 9 - i;
  WriteIdx(original, dir, "t10k", /*gzip=*/false);
  auto set = LoadFashionMnist(dir, Split::kTest);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->labels, original.labels);
}

TEST(IdxTest, BadMagicIsAnErrorNamingTheFile) {
  const std::string dir = TestDir();
  WriteIdx(MakeImageSet(2), dir, "x", false);
  WriteFile(dir + "/bad-images", "\x12\x34\x08\x03" + std::string(100, '\0'), true);
  Status s = ReadIdx(dir + "/bad-images", dir + "/x-labels-idx1-ubyte").status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(s.message(), dir + "/bad-images")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "bad magic 0x12340803")) << s.message();
}

TEST(IdxTest, WrongElementTypeAndRankAreErrors) {
  const std::string dir = TestDir();
  WriteIdx(MakeImageSet(2), dir, "x", false);
  WriteFile(dir + "/float-images", IdxHeader(0x0d, {2, 4, 5}), false);
  Status s = ReadIdx(dir + "/float-images", dir + "/x-labels-idx1-ubyte").status();
  EXPECT_TRUE(Contains(s.message(), "element type 0x0d")) << s.message();
  // Labels given where images are expected: rank 1 instead of 3.
  s = ReadIdx(dir + "/x-labels-idx1-ubyte", dir + "/x-labels-idx1-ubyte").status();
  EXPECT_TRUE(Contains(s.message(), "has 1 dimensions, expected 3 or 4")) << s.message();
}

TEST(IdxTest, TruncatedImagesNameExpectedAndActualBytes) {
  const std::string dir = TestDir();
  WriteIdx(MakeImageSet(3, 28, 28), dir, "x", false);
  WriteFile(dir + "/short-images.gz", IdxHeader(0x08, {3, 28, 28}) + std::string(1234, 'a'), true);
  Status s = ReadIdx(dir + "/short-images.gz", dir + "/x-labels-idx1-ubyte").status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(s.message(), "short-images.gz: expected 2352 pixel bytes, file has 1234"))
      << s.message();
}

TEST(IdxTest, TrailingBytesAreAnError) {
  const std::string dir = TestDir();
  WriteIdx(MakeImageSet(2), dir, "x", false);
  WriteFile(dir + "/long-labels", IdxHeader(0x08, {2}) + "\x01\x02\x03", false);
  Status s = ReadIdx(dir + "/x-images-idx3-ubyte", dir + "/long-labels").status();
  EXPECT_TRUE(Contains(s.message(), "long-labels: has bytes after the expected 2 label bytes"))
      << s.message();
}

TEST(IdxTest, ImageAndLabelCountsMustMatch) {
  const std::string dir = TestDir();
  WriteIdx(MakeImageSet(3), dir, "three", false);
  WriteIdx(MakeImageSet(4), dir, "four", false);
  Status s = ReadIdx(dir + "/three-images-idx3-ubyte", dir + "/four-labels-idx1-ubyte").status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(s.message(), "has 3 images but")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "four-labels-idx1-ubyte has 4 labels")) << s.message();
}

TEST(IdxTest, MissingFileIsNotFound) {
  auto set = LoadFashionMnist("/nonexistent/dir", Split::kTrain);
  EXPECT_EQ(set.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(set.status().message(), "/nonexistent/dir/train-images-idx3-ubyte.gz"))
      << set.status().message();
}

TEST(IdxTest, FashionMnistLabelsOutsideZeroToNineAreAnError) {
  const std::string dir = TestDir();
  ImageSet set = MakeImageSet(12, 28, 28);  // labels 0..11
  WriteIdx(set, dir, "train", true);
  Status s = LoadFashionMnist(dir, Split::kTrain).status();
  EXPECT_TRUE(Contains(s.message(), "label 10 of example 10 is outside 0..9")) << s.message();
}

}  // namespace
}  // namespace pstrain
