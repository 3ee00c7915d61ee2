// TFRecords of JPEG/PNG images as TF's conversion scripts write them (image/encoded,
// image/class/label), written here from known pixels with libjpeg/libpng and read back through
// the whole input pipeline: pixels, labels, resize, augmentation, corrupt bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/data/image_codec.h"
#include "common/data/image_example.h"
#include "common/record_io.h"
#include "tests/data/encoded_images.h"
#include "tests/data/test_images.h"
#include "tests/test_env.h"
#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace {

using testing_data::Contains;
using testing_data::Jpeg;
using testing_data::MaxDiff;
using testing_data::Pixels;
using testing_data::Png;
using testing_data::TestDir;

void WriteRecords(const std::string& path, const std::vector<std::string>& records) {
  auto w = RecordWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& r : records) ASSERT_TRUE(w->Write(r).ok());
  ASSERT_TRUE(w->Close().ok());
}

// Options reading `files` in order, once, with x/255 only.
InputOptions Encoded(const std::vector<std::string>& files, const ImageShape& shape) {
  InputOptions o;
  o.source = InputSource::kTfRecord;
  o.tfrecord_files = files;
  o.image_shape = shape;
  o.shuffle = false;
  o.num_epochs = 1;
  o.drop_remainder = false;
  return o;
}

struct Decoded {
  std::vector<std::vector<uint8_t>> images;  // HWC, back from x/255
  std::vector<int32_t> labels;
  Status status;
};

Decoded ReadAll(const InputOptions& o, int64_t batch = 3, int index = 0, int count = 1,
                uint64_t seed = 1) {
  Decoded d;
  auto p = InputPipeline::Create(o, batch, index, count, seed);
  if (!p.ok()) {
    d.status = p.status();
    return d;
  }
  const ImageShape s = o.image_shape;
  while (true) {
    auto b = (*p)->Next();
    if (!b.ok()) {
      if (b.status().code() != StatusCode::kOutOfRange) d.status = b.status();
      return d;
    }
    for (size_t i = 0; i < b->labels.size(); ++i) {
      const float* chw = b->images.data() + i * s.bytes();
      std::vector<uint8_t> hwc(s.bytes());
      for (int64_t c = 0; c < s.depth; ++c) {
        for (int64_t k = 0; k < s.height * s.width; ++k) {
          hwc[k * s.depth + c] =
              static_cast<uint8_t>(std::lround(chw[c * s.height * s.width + k] * 255));
        }
      }
      d.images.push_back(std::move(hwc));
      d.labels.push_back(b->labels[i]);
    }
  }
}

TEST(EncodedTfRecordTest, PngAndJpegRecordsReadThroughThePipeline) {
  const std::string dir = TestDir();
  const ImageShape s{12, 10, 3};
  std::vector<std::string> png, jpeg;
  for (int i = 0; i < 5; ++i) {
    png.push_back(EncodeImageFileExample(Png(Pixels(s, i), s), "png", s, 100 + i));
    jpeg.push_back(EncodeImageFileExample(Jpeg(Pixels(s, i), s), "jpeg", s, 200 + i));
  }
  WriteRecords(dir + "/png", png);
  WriteRecords(dir + "/jpeg", jpeg);
  for (int threads : {1, 3}) {
    InputOptions o = Encoded({dir + "/png", dir + "/jpeg"}, s);
    o.threads = threads;
    Decoded d = ReadAll(o);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ASSERT_EQ(d.images.size(), 10u);
    for (int i = 0; i < 5; ++i) {
      const auto want = Pixels(s, i);
      EXPECT_EQ(d.images[i], want) << "PNG is lossless: exact pixels";
      EXPECT_EQ(d.labels[i], 100 + i);
      std::string jpeg_pixels(d.images[5 + i].begin(), d.images[5 + i].end());
      EXPECT_LE(MaxDiff(jpeg_pixels, want), 3) << "JPEG at quality 95";
      EXPECT_EQ(d.labels[5 + i], 200 + i);
    }
  }
}

TEST(EncodedTfRecordTest, GrayscaleModelReadsRgbJpegsAndFeatureNamesComeFromOptions) {
  const std::string dir = TestDir();
  const ImageShape rgb{8, 8, 3}, gray{8, 8, 1};
  std::vector<std::string> records;
  for (int i = 0; i < 3; ++i) {
    std::string r = EncodeImageFileExample(Jpeg(Pixels(rgb, i), rgb), "jpeg", rgb, i);
    records.push_back(r);
  }
  WriteRecords(dir + "/a", records);
  InputOptions o = Encoded({dir + "/a"}, gray);
  Decoded d = ReadAll(o);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.images.size(), 3u);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 1, 2}));

  o.features.image = "jpeg_bytes";  // no such feature, and no raw image either
  d = ReadAll(o);
  EXPECT_TRUE(Contains(d.status.message(), "has no 'jpeg_bytes' (JPEG/PNG bytes) nor 'img_raw'"))
      << d.status.message();
}

TEST(EncodedTfRecordTest, LabelOffsetMakesImageNetLabelsZeroBased) {
  const std::string dir = TestDir();
  const ImageShape s{4, 4, 3};
  const std::string png = Png(Pixels(s, 0), s);
  WriteRecords(dir + "/a", {EncodeImageFileExample(png, "png", s, 1),
                            EncodeImageFileExample(png, "png", s, 1000)});
  InputOptions o = Encoded({dir + "/a"}, s);
  o.features.label_offset = 1;
  Decoded d = ReadAll(o);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 999}));

  // TF's background class 0 has no place once shifted: named, not wrapped.
  WriteRecords(dir + "/b", {EncodeImageFileExample(png, "png", s, 0)});
  d = ReadAll(Encoded({dir + "/b"}, s));
  EXPECT_TRUE(d.status.ok());
  o.tfrecord_files = {dir + "/b"};
  d = ReadAll(o);
  EXPECT_TRUE(
      Contains(d.status.message(),
               dir + "/b at record offset 0 (record 0): label 0 minus label_offset 1 is -1"))
      << d.status.message();
}

TEST(EncodedTfRecordTest, WrongSizeWithoutResizeNamesTheRecordAndBothSizes) {
  const std::string dir = TestDir();
  const ImageShape small{8, 8, 3}, big{10, 12, 3};
  WriteRecords(dir + "/a", {EncodeImageFileExample(Png(Pixels(small, 0), small), "png", small, 0),
                            EncodeImageFileExample(Png(Pixels(big, 0), big), "png", big, 0)});
  InputOptions o = Encoded({dir + "/a"}, small);
  Decoded d = ReadAll(o);
  EXPECT_TRUE(Contains(d.status.message(), dir + "/a at record offset "));
  EXPECT_TRUE(
      Contains(d.status.message(),
               "(record 1): image is 10x12x3, the model's input is 8x8x3 (set input.resize"))
      << d.status.message();

  for (ResizeMethod m : {ResizeMethod::kBilinear, ResizeMethod::kCenterCrop}) {
    o.resize = m;
    d = ReadAll(o);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ASSERT_EQ(d.images.size(), 2u);
    EXPECT_EQ(d.images[0], Pixels(small, 0)) << "an image of the right size is not resampled";
  }
}

TEST(EncodedTfRecordTest, CorruptImageBytesReachNextNamingFileAndRecord) {
  const std::string dir = TestDir();
  const ImageShape s{16, 16, 3};
  const std::string jpeg = Jpeg(Pixels(s, 0), s);
  WriteRecords(dir + "/a", {EncodeImageFileExample(jpeg, "jpeg", s, 0),
                            EncodeImageFileExample(jpeg, "jpeg", s, 1),
                            EncodeImageFileExample(jpeg.substr(0, jpeg.size() / 2), "jpeg", s, 2),
                            EncodeImageFileExample(jpeg, "jpeg", s, 3)});
  for (int threads : {1, 2}) {
    InputOptions o = Encoded({dir + "/a"}, s);
    o.threads = threads;
    Decoded d = ReadAll(o, 1);
    EXPECT_EQ(d.status.code(), StatusCode::kDataLoss);
    EXPECT_TRUE(Contains(d.status.message(), dir + "/a at record offset "));
    EXPECT_TRUE(Contains(d.status.message(), "(record 2): corrupt JPEG")) << d.status.message();
    EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 1})) << "the batches before it arrive";
  }
}

// Writes 16 PNG records of `s` (label i = image i) and returns the options reading them.
InputOptions SixteenPngs(const std::string& dir, const ImageShape& s) {
  std::vector<std::string> records;
  for (int i = 0; i < 16; ++i) {
    records.push_back(EncodeImageFileExample(Png(Pixels(s, i), s), "png", s, i));
  }
  WriteRecords(dir + "/train-0", records);
  WriteRecords(dir + "/test-0", records);
  InputOptions o = Encoded({dir + "/train-0"}, s);
  o.test_tfrecord_pattern = dir + "/test-*";
  return o;
}

TEST(AugmentTest, FlipIsAnExactMirrorOfTheDecodedImage) {
  const ImageShape s{6, 5, 3};
  InputOptions o = SixteenPngs(TestDir(), s);
  o.random_flip = true;
  Decoded d = ReadAll(o);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  int flipped = 0;
  for (size_t i = 0; i < d.images.size(); ++i) {
    const auto orig = Pixels(s, d.labels[i]);
    std::vector<uint8_t> mirror(orig.size());
    for (int64_t y = 0; y < s.height; ++y)
      for (int64_t x = 0; x < s.width; ++x)
        for (int64_t c = 0; c < 3; ++c)
          mirror[(y * s.width + x) * 3 + c] = orig[(y * s.width + s.width - 1 - x) * 3 + c];
    EXPECT_TRUE(d.images[i] == orig || d.images[i] == mirror) << i;
    flipped += d.images[i] == mirror;
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 16);
}

TEST(AugmentTest, PadCropShiftsTheContentWithinPAndFillsWithZeros) {
  const ImageShape s{6, 6, 1};
  const int p = 2;
  InputOptions o = SixteenPngs(TestDir(), s);
  o.random_crop_padding = p;
  Decoded d = ReadAll(o);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  std::set<std::pair<int, int>> shifts;
  for (size_t i = 0; i < d.images.size(); ++i) {
    const auto orig = Pixels(s, d.labels[i]);
    bool explained = false;
    for (int dy = -p; dy <= p && !explained; ++dy) {
      for (int dx = -p; dx <= p && !explained; ++dx) {
        bool match = true;
        for (int y = 0; y < 6 && match; ++y) {
          for (int x = 0; x < 6 && match; ++x) {
            const int sy = y + dy, sx = x + dx;
            const int want = (sy < 0 || sy >= 6 || sx < 0 || sx >= 6) ? 0 : orig[sy * 6 + sx];
            match = d.images[i][y * 6 + x] == want;
          }
        }
        if (match) {
          explained = true;
          shifts.insert({dy, dx});
        }
      }
    }
    EXPECT_TRUE(explained) << "image " << i << " is no shift of its original within " << p;
  }
  EXPECT_GT(shifts.size(), 3u) << "offsets should vary";
}

TEST(AugmentTest, SameSeedAndShardGiveTheSameBatchesAndEvaluationIsUnaugmented) {
  const ImageShape s{6, 6, 3};
  InputOptions o = SixteenPngs(TestDir(), s);
  o.random_flip = true;
  o.random_crop_padding = 2;
  o.shuffle = true;
  o.shuffle_capacity = 8;
  o.min_after_dequeue = 4;
  o.threads = 1;
  const Decoded a = ReadAll(o, 4, 1, 2, 7);
  o.threads = 3;
  const Decoded b = ReadAll(o, 4, 1, 2, 7);
  const Decoded other_seed = ReadAll(o, 4, 1, 2, 8);
  ASSERT_TRUE(a.status.ok() && b.status.ok()) << a.status.ToString() << b.status.ToString();
  EXPECT_EQ(a.labels.size(), 8u) << "worker 1 of 2 reads half";
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_TRUE(a.images == b.images) << "same seed and shard, any thread count: same batches";
  EXPECT_TRUE(a.images != other_seed.images || a.labels != other_seed.labels);

  const Decoded eval = ReadAll(o.ForEvaluation(), 5);
  ASSERT_TRUE(eval.status.ok()) << eval.status.ToString();
  ASSERT_EQ(eval.images.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(eval.labels[i], i);
    EXPECT_EQ(eval.images[i], Pixels(s, i)) << "evaluation is decoded, not augmented";
  }
}

// tests/data/testdata/tf_written: records TensorFlow's own tf.io.TFRecordWriter wrote, with
// images its own encoders made, and the pixels its own tf.io.decode_image gives back
// (write_fixture.py). PNG must match TensorFlow exactly, JPEG tf.io.decode_jpeg with
// dct_method="INTEGER_ACCURATE" (libjpeg's ISLOW, as pstrain decodes) within a level. The last
// record's JPEG is cut short: an error naming the file and the record, after the good records
// arrive.
TEST(EncodedTfRecordTest, RecordsTensorFlowWroteDecodeAsTensorFlowDecodesThem) {
  const std::string dir = testing::SourceDir() + "/tests/data/testdata/tf_written";
  std::ifstream in(dir + "/tf_images_decoded.json");
  ASSERT_TRUE(in) << "missing " << dir << "/tf_images_decoded.json";
  const nlohmann::json expected = nlohmann::json::parse(in);
  const ImageShape s{expected["height"].get<int64_t>(), expected["width"].get<int64_t>(),
                     expected["channels"].get<int64_t>()};
  Decoded d = ReadAll(Encoded({dir + "/tf_images.tfrecord"}, s), /*batch=*/1);
  const auto& records = expected["records"];
  ASSERT_EQ(d.images.size(), records.size()) << d.status.ToString();
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(d.labels[i], records[i]["label"].get<int32_t>()) << "record " << i;
    if (records[i]["format"] == "png") {
      EXPECT_EQ(d.images[i], records[i]["pixels"].get<std::vector<uint8_t>>())
          << "record " << i << " (PNG)";
    } else {
      const auto want = records[i]["pixels_accurate"].get<std::vector<uint8_t>>();
      EXPECT_LE(MaxDiff(std::string(d.images[i].begin(), d.images[i].end()), want), 1)
          << "record " << i << " (JPEG)";
    }
  }
  ASSERT_FALSE(d.status.ok()) << "the cut-short JPEG of the last record was read";
  const std::string corrupt = "(record " + std::to_string(records.size()) + ")";
  EXPECT_NE(d.status.message().find("tf_images.tfrecord"), std::string::npos) << d.status.message();
  EXPECT_NE(d.status.message().find(corrupt), std::string::npos) << d.status.message();
}

}  // namespace
}  // namespace pstrain
