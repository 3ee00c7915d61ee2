#include "common/data/image_example.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/data/example.pb.h"
#include "common/data/image_shards.h"
#include "common/record_io.h"
#include "tests/data/test_images.h"

namespace pstrain {
namespace {

using testing_data::Contains;
using testing_data::MakeImageSet;
using testing_data::TestDir;

void ExpectSameImages(const ImageSet& a, const ImageSet& b) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_TRUE(a.pixels == b.pixels) << "pixels differ";
  EXPECT_EQ(a.labels, b.labels);
}

TEST(ImageExampleTest, RoundTripsPixelsLabelAndShape) {
  const ImageShape shape{3, 2, 3};
  std::vector<uint8_t> pixels(shape.bytes());
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 13);
  std::string record = EncodeImageExample(pixels.data(), shape, 7);

  tensorflow::Example example;
  ASSERT_TRUE(example.ParseFromString(record));
  const auto& f = example.features().feature();
  EXPECT_EQ(f.at("height").int64_list().value(0), 3);
  EXPECT_EQ(f.at("width").int64_list().value(0), 2);
  EXPECT_EQ(f.at("depth").int64_list().value(0), 3);

  std::string decoded;
  int32_t label = -1;
  ASSERT_TRUE(DecodeImageExample(record, shape, "r", &decoded, &label).ok());
  EXPECT_EQ(label, 7);
  EXPECT_EQ(decoded, std::string(pixels.begin(), pixels.end()));
}

TEST(ImageExampleTest, RecordWithoutShapeFeaturesTakesTheExpectedShape) {
  tensorflow::Example example;
  auto& f = *example.mutable_features()->mutable_feature();
  f["img_raw"].mutable_bytes_list()->add_value(std::string(784, '\x05'));
  f["label"].mutable_int64_list()->add_value(3);
  std::string pixels;
  int32_t label = 0;
  Status s = DecodeImageExample(example.SerializeAsString(), ImageShape{}, "r", &pixels, &label);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(pixels.size(), 784u);
  EXPECT_EQ(label, 3);
  // The same bytes read as 14x14x4 per a reader option.
  s = DecodeImageExample(example.SerializeAsString(), ImageShape{14, 14, 4}, "r", &pixels, &label);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(ImageExampleTest, MalformedExamplesAreNamedErrors) {
  const std::string where = "f.tfrecord at record offset 42";
  std::string pixels;
  int32_t label;
  Status s = DecodeImageExample("\xff\xff\xff", ImageShape{}, where, &pixels, &label);
  EXPECT_TRUE(Contains(s.message(), where + ": not a valid tf.train.Example")) << s.message();

  tensorflow::Example no_label;
  (*no_label.mutable_features()->mutable_feature())["img_raw"].mutable_bytes_list()->add_value(
      std::string(784, 'x'));
  s = DecodeImageExample(no_label.SerializeAsString(), ImageShape{}, where, &pixels, &label);
  EXPECT_TRUE(Contains(s.message(),
                       where + ": Example has no 'image/class/label' feature (int64) nor 'label'"))
      << s.message();

  tensorflow::Example no_image;
  (*no_image.mutable_features()->mutable_feature())["label"].mutable_int64_list()->add_value(1);
  s = DecodeImageExample(no_image.SerializeAsString(), ImageShape{}, where, &pixels, &label);
  EXPECT_TRUE(Contains(s.message(), where + ": Example has no 'image/encoded' (JPEG/PNG bytes) nor "
                                            "'img_raw' (raw pixels) feature"))
      << s.message();

  std::vector<uint8_t> short_image(700);
  std::string record = EncodeImageExample(short_image.data(), ImageShape{28, 25, 1}, 1);
  s = DecodeImageExample(record, ImageShape{}, where, &pixels, &label);
  EXPECT_TRUE(Contains(s.message(), where + ": image is 28x25x1, expected 28x28x1")) << s.message();
}

TEST(ImageShardsTest, ShardsReadBackAsTheOriginalImages) {
  const std::string dir = TestDir();
  ImageSet original = MakeImageSet(103, 5, 4, 3);
  auto paths = WriteImageShards(original, dir + "/set", 4);
  ASSERT_TRUE(paths.ok()) << paths.status().ToString();
  ASSERT_EQ(paths->size(), 4u);
  EXPECT_EQ((*paths)[0], dir + "/set-00000-of-00004");
  EXPECT_EQ((*paths)[3], dir + "/set-00003-of-00004");
  auto matched = MatchFiles(dir + "/set-*-of-00004");
  ASSERT_TRUE(matched.ok());
  EXPECT_EQ(*matched, *paths);
  auto back = ReadImageShards(*matched, ImageShape{5, 4, 3});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameImages(*back, original);
}

TEST(ImageShardsTest, MatchFilesWithoutMatchNamesThePattern) {
  auto m = MatchFiles("/nonexistent/fmnist-train-*");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(m.status().message(), "/nonexistent/fmnist-train-*"));
}

// Runs the converter binary on `data_dir` and reads its shards back.
ImageSet ConvertWithBinary(const std::string& data_dir, const std::string& split,
                           const std::string& prefix, int shards) {
  const std::string cmd = std::string(PSTRAIN_IDX2TFRECORD) + " --data_dir=" + data_dir +
                          " --split=" + split + " --output_prefix=" + prefix +
                          " --num_shards=" + std::to_string(shards) + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::string> paths;
  for (int i = 0; i < shards; ++i) paths.push_back(ShardPath(prefix, i, shards));
  auto back = ReadImageShards(paths, ImageShape{});
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return back.ok() ? std::move(back).value() : ImageSet();
}

TEST(ImageShardsTest, ConverterBinaryWritesShardsThatReadBack) {
  const std::string dir = TestDir();
  ImageSet original = MakeImageSet(50, 28, 28);
  for (int i = 0; i < 50; ++i) original.labels[i] = i % 10;
  testing_data::WriteIdx(original, dir, "train", /*gzip=*/true);
  ExpectSameImages(ConvertWithBinary(dir, "train", dir + "/out", 3), original);
  // A bad flag is reported, not ignored.
  EXPECT_NE(std::system((std::string(PSTRAIN_IDX2TFRECORD) + " --data_dir=" + dir +
                         " --split=validation --output_prefix=" + dir + "/x 2>/dev/null")
                            .c_str()),
            0);
}

TEST(ImageShardsTest, ConverterBinaryConvertsFashionMnistTestSplit) {
  if (!testing_data::HaveFashionMnist()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << testing_data::kFashionMnistDir;
  }
  const std::string dir = TestDir();
  auto original = LoadFashionMnist(testing_data::kFashionMnistDir, Split::kTest);
  ASSERT_TRUE(original.ok());
  ExpectSameImages(ConvertWithBinary(testing_data::kFashionMnistDir, "test", dir + "/fmnist", 4),
                   *original);
}

// Byte offset of record `n` in a file written by WriteImageShards (all records the same size).
int64_t RecordOffset(const ImageSet& set, int64_t n) {
  const ImageShape shape{set.height, set.width, set.channels};
  return n * (12 + EncodeImageExample(set.image(0), shape, 0).size() + 4);
}

TEST(ImageShardsTest, FlippedByteIsAnErrorNamingFileAndOffset) {
  const std::string dir = TestDir();
  ImageSet set = MakeImageSet(20, 28, 28);
  for (int i = 0; i < 20; ++i) set.labels[i] = 1;  // equal-sized records
  auto paths = WriteImageShards(set, dir + "/s", 2);
  ASSERT_TRUE(paths.ok());
  const int64_t offset = RecordOffset(set, 3);
  testing_data::FlipByte((*paths)[1], offset + 12 + 100);  // in record 3's data
  Status s = ReadImageShards(*paths, ImageShape{}).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(s.message(), (*paths)[1] + " at byte offset " + std::to_string(offset)))
      << s.message();
}

TEST(ImageShardsTest, TruncatedShardIsAnErrorNamingFileAndOffset) {
  const std::string dir = TestDir();
  ImageSet set = MakeImageSet(10, 28, 28);
  for (int i = 0; i < 10; ++i) set.labels[i] = 1;
  auto paths = WriteImageShards(set, dir + "/s", 1);
  ASSERT_TRUE(paths.ok());
  const std::string& path = (*paths)[0];
  ASSERT_EQ(truncate(path.c_str(), testing_data::FileSize(path) - 10), 0);
  Status s = ReadImageShards(*paths, ImageShape{}).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(
      Contains(s.message(), path + " at byte offset " + std::to_string(RecordOffset(set, 9))))
      << s.message();
}

TEST(ImageShardsTest, RecordThatIsNotAnExampleNamesFileAndRecordOffset) {
  const std::string dir = TestDir();
  const std::string path = dir + "/mixed.tfrecord";
  ImageSet set = MakeImageSet(1, 28, 28);
  std::string good = EncodeImageExample(set.image(0), ImageShape{}, 0);
  {
    auto w = RecordWriter::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Write(good).ok());
    ASSERT_TRUE(w->Write("not a proto \xff\xff").ok());
    ASSERT_TRUE(w->Close().ok());
  }
  Status s = ReadImageShards({path}, ImageShape{}).status();
  const std::string offset = std::to_string(12 + good.size() + 4);
  EXPECT_TRUE(
      Contains(s.message(), path + " at record offset " + offset + " (record 1): not a valid"))
      << s.message();
}

}  // namespace
}  // namespace pstrain
