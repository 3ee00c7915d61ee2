// One image with its label as a tf.train.Example, the way TF conversion scripts store them:
// features `img_raw` (bytes, height x width x depth uint8), `label` (int64), and `height`,
// `width`, `depth` (int64; optional when reading).
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

// `pixels` holds shape.bytes() bytes, height x width x depth.
std::string EncodeImageExample(const uint8_t* pixels, const ImageShape& shape, int64_t label);

// Parses one serialized Example. A record without height/width/depth is taken to have the
// `expected` shape; one that has them must match it. Errors start with `where` (a file and
// record offset). On success *pixels holds expected.bytes() bytes.
Status DecodeImageExample(const std::string& record, const ImageShape& expected,
                          const std::string& where, std::string* pixels, int32_t* label);

// Streams the image Examples of one TFRecord file.
class ImageExampleReader {
 public:
  static Result<ImageExampleReader> Open(const std::string& path, const ImageShape& expected);
  ImageExampleReader(ImageExampleReader&&) noexcept;
  ImageExampleReader& operator=(ImageExampleReader&&) noexcept;
  ~ImageExampleReader();

  // OutOfRange at the end of the file; DataLoss naming the file and byte offset for a corrupt
  // record, or the file and record offset for a record that is not an image Example.
  Status Next(std::string* pixels, int32_t* label);
  // Byte offset of the record Next() returned last.
  uint64_t record_offset() const { return record_offset_; }
  const std::string& path() const { return reader_.path(); }

 private:
  ImageExampleReader(RecordReader reader, const ImageShape& expected);

  RecordReader reader_;
  ImageShape expected_;
  std::string record_;
  uint64_t record_offset_ = 0;
  // Reused between records: parsing into a cleared message avoids reallocating its map.
  std::unique_ptr<tensorflow::Example> scratch_;
};

}  // namespace pstrain
