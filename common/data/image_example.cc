#include "common/data/image_example.h"

#include <limits>

#include "common/data/example.pb.h"

namespace pstrain {
namespace {

void SetInt64(tensorflow::Features* features, const char* key, int64_t value) {
  (*features->mutable_feature())[key].mutable_int64_list()->add_value(value);
}

// The single int64 of feature `key`; absent (nullopt-like: *present = false) is allowed.
Status GetInt64(const tensorflow::Features& features, const char* key, const std::string& where,
                bool* present, int64_t* value) {
  auto it = features.feature().find(key);
  *present = it != features.feature().end();
  if (!*present) return Status::OK();
  if (!it->second.has_int64_list() || it->second.int64_list().value_size() != 1) {
    return DataLoss(where + ": feature '" + key + "' is not a single int64");
  }
  *value = it->second.int64_list().value(0);
  return Status::OK();
}

Status Decode(tensorflow::Example* example, const std::string& record, const ImageShape& expected,
              const std::string& where, std::string* pixels, int32_t* label) {
  if (!example->ParseFromString(record)) {
    return DataLoss(where + ": not a valid tf.train.Example (" + std::to_string(record.size()) +
                    " bytes)");
  }
  tensorflow::Features* features = example->mutable_features();
  bool present = false;
  int64_t label64 = 0;
  RETURN_IF_ERROR(GetInt64(*features, "label", where, &present, &label64));
  if (!present) return DataLoss(where + ": Example has no 'label' feature (int64)");
  if (label64 < 0 || label64 > std::numeric_limits<int32_t>::max()) {
    return DataLoss(where + ": label " + std::to_string(label64) + " is outside 0..2^31-1");
  }

  ImageShape shape = expected;
  RETURN_IF_ERROR(GetInt64(*features, "height", where, &present, &shape.height));
  RETURN_IF_ERROR(GetInt64(*features, "width", where, &present, &shape.width));
  RETURN_IF_ERROR(GetInt64(*features, "depth", where, &present, &shape.depth));
  if (shape != expected) {
    return DataLoss(where + ": image is " + shape.ToString() + ", expected " + expected.ToString());
  }

  auto it = features->mutable_feature()->find("img_raw");
  if (it == features->mutable_feature()->end()) {
    return DataLoss(where + ": Example has no 'img_raw' feature (bytes)");
  }
  if (!it->second.has_bytes_list() || it->second.bytes_list().value_size() != 1) {
    return DataLoss(where + ": feature 'img_raw' is not a single bytes value");
  }
  std::string* raw = it->second.mutable_bytes_list()->mutable_value(0);
  if (static_cast<int64_t>(raw->size()) != expected.bytes()) {
    return DataLoss(where + ": 'img_raw' has " + std::to_string(raw->size()) + " bytes, expected " +
                    std::to_string(expected.bytes()) + " (" + expected.ToString() + ")");
  }
  // Swapping hands over the parsed buffer without copying the pixels.
  pixels->swap(*raw);
  *label = static_cast<int32_t>(label64);
  return Status::OK();
}

}  // namespace

std::string ImageShape::ToString() const {
  return std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(depth);
}

std::string EncodeImageExample(const uint8_t* pixels, const ImageShape& shape, int64_t label) {
  tensorflow::Example example;
  tensorflow::Features* features = example.mutable_features();
  (*features->mutable_feature())["img_raw"].mutable_bytes_list()->add_value(
      reinterpret_cast<const char*>(pixels), shape.bytes());
  SetInt64(features, "label", label);
  SetInt64(features, "height", shape.height);
  SetInt64(features, "width", shape.width);
  SetInt64(features, "depth", shape.depth);
  return example.SerializeAsString();
}

Status DecodeImageExample(const std::string& record, const ImageShape& expected,
                          const std::string& where, std::string* pixels, int32_t* label) {
  tensorflow::Example example;
  return Decode(&example, record, expected, where, pixels, label);
}

Result<ImageExampleReader> ImageExampleReader::Open(const std::string& path,
                                                    const ImageShape& expected) {
  ASSIGN_OR_RETURN(RecordReader reader, RecordReader::Open(path));
  return ImageExampleReader(std::move(reader), expected);
}

ImageExampleReader::ImageExampleReader(RecordReader reader, const ImageShape& expected)
    : reader_(std::move(reader)),
      expected_(expected),
      scratch_(std::make_unique<tensorflow::Example>()) {}

ImageExampleReader::ImageExampleReader(ImageExampleReader&&) noexcept = default;
ImageExampleReader& ImageExampleReader::operator=(ImageExampleReader&&) noexcept = default;
ImageExampleReader::~ImageExampleReader() = default;

Status ImageExampleReader::Next(std::string* pixels, int32_t* label) {
  const uint64_t offset = reader_.offset();
  RETURN_IF_ERROR(reader_.Next(&record_));
  record_offset_ = offset;
  return Decode(scratch_.get(), record_, expected_,
                reader_.path() + " at record offset " + std::to_string(offset), pixels, label);
}

}  // namespace pstrain
