// One image with its label as a tf.train.Example, in either of the two ways TF conversion
// scripts store them:
//   encoded  `image/encoded` (JPEG or PNG bytes) and `image/class/label` (int64), with
//            `image/format`, `image/height`, `image/width` (ignored when reading): TF's
//            ImageNet and Flowers scripts, TFDS. Decoding the bytes is left to the caller
//            (image_codec.h), so that it can happen on the input pipeline's prefetch threads.
//   raw      `img_raw` (bytes, height x width x depth uint8), `label` (int64), and `height`,
//            `width`, `depth` (int64; optional when reading): pstrain-idx2tfrecord, TF's MNIST.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/record_io.h"
#include "common/status.h"

namespace tensorflow {
class Example;
}

namespace pstrain {

struct ImageShape {
  int64_t height = 28;
  int64_t width = 28;
  int64_t depth = 1;

  int64_t bytes() const { return height * width * depth; }
  std::string ToString() const;  // "28x28x1"
  bool operator==(const ImageShape& o) const {
    return height == o.height && width == o.width && depth == o.depth;
  }
  bool operator!=(const ImageShape& o) const { return !(*this == o); }
};

// Which features hold the image and the label (the `input:` config can rename them).
struct ExampleFeatures {
  std::string image = "image/encoded";  // JPEG or PNG bytes
  std::string raw_image = "img_raw";    // read when a record has no `image`
  std::string label = "image/class/label";
  // Subtracted from every stored label (TF-slim's labels_offset): 1 turns ImageNet's 1-based
  // labels (0 is TF's background class) into 0-based classes.
  int64_t label_offset = 0;
};
// Read when a record has no `ExampleFeatures::label` (raw records' label).
inline constexpr char kRawLabelFeature[] = "label";

// One parsed record.
struct ImageRecord {
  // encoded: JPEG or PNG bytes; raw: expected.bytes() bytes, height x width x depth.
  std::string bytes;
  bool encoded = false;
  int32_t label = 0;
};

// `pixels` holds shape.bytes() bytes, height x width x depth.
std::string EncodeImageExample(const uint8_t* pixels, const ImageShape& shape, int64_t label);
// The encoded layout, as TF's Flowers script writes it; `format` "jpeg" or "png".
std::string EncodeImageFileExample(const std::string& encoded, const std::string& format,
                                   const ImageShape& shape, int64_t label);

// Parses one serialized Example without decoding JPEG/PNG bytes. A raw record without
// height/width/depth is taken to have the `expected` shape; one that has them must match it.
// Errors start with `where` (a file and record).
Status ParseImageExample(const std::string& record, const ImageShape& expected,
                         const ExampleFeatures& features, const std::string& where,
                         ImageRecord* out);

// ParseImageExample with the default features, then JPEG/PNG bytes decoded to expected.depth
// channels; the image must be exactly `expected`. On success *pixels holds expected.bytes().
Status DecodeImageExample(const std::string& record, const ImageShape& expected,
                          const std::string& where, std::string* pixels, int32_t* label);

// Streams the image Examples of one TFRecord file.
class ImageExampleReader {
 public:
  static Result<ImageExampleReader> Open(const std::string& path, const ImageShape& expected,
                                         const ExampleFeatures& features = {},
                                         Compression compression = Compression::kAuto);
  ImageExampleReader(ImageExampleReader&&) noexcept;
  ImageExampleReader& operator=(ImageExampleReader&&) noexcept;
  ~ImageExampleReader();

  // OutOfRange at the end of the file; DataLoss naming the file and byte offset for a corrupt
  // record, or the file and record (offset and index) for a record that is not an image
  // Example.
  Status Next(ImageRecord* out);
  // Next(), then encoded bytes decoded (see DecodeImageExample).
  Status Next(std::string* pixels, int32_t* label);
  // Byte offset and index (from 0) of the record Next() returned last.
  uint64_t record_offset() const { return record_offset_; }
  int64_t record_index() const { return record_index_; }
  // "<path> at record offset <offset> (record <index>)": how errors name that record.
  std::string where() const;
  const std::string& path() const { return reader_.path(); }

 private:
  ImageExampleReader(RecordReader reader, const ImageShape& expected,
                     const ExampleFeatures& features);

  RecordReader reader_;
  ImageShape expected_;
  ExampleFeatures features_;
  std::string record_;
  uint64_t record_offset_ = 0;
  int64_t record_index_ = -1;
  ImageRecord scratch_record_;
  // Reused between records: parsing into a cleared message avoids reallocating its map.
  std::unique_ptr<tensorflow::Example> scratch_;
};

}  // namespace pstrain
