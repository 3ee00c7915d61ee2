#include "common/data/image_example.h"

#include <limits>

#include "common/data/example.pb.h"
#include "common/data/image_codec.h"

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

// The single bytes value of feature `key`, or null when the record has no such feature.
Result<std::string*> GetBytes(tensorflow::Features* features, const std::string& key,
                              const std::string& where) {
  auto it = features->mutable_feature()->find(key);
  if (it == features->mutable_feature()->end()) return static_cast<std::string*>(nullptr);
  if (!it->second.has_bytes_list() || it->second.bytes_list().value_size() != 1) {
    return DataLoss(where + ": feature '" + key + "' is not a single bytes value");
  }
  return it->second.mutable_bytes_list()->mutable_value(0);
}

Status Parse(tensorflow::Example* example, const std::string& record, const ImageShape& expected,
             const ExampleFeatures& names, const std::string& where, ImageRecord* out) {
  if (!example->ParseFromString(record)) {
    return DataLoss(where + ": not a valid tf.train.Example (" + std::to_string(record.size()) +
                    " bytes)");
  }
  tensorflow::Features* features = example->mutable_features();
  bool present = false;
  int64_t label64 = 0;
  std::string label_key = names.label;
  RETURN_IF_ERROR(GetInt64(*features, label_key.c_str(), where, &present, &label64));
  if (!present && label_key != kRawLabelFeature) {
    label_key = kRawLabelFeature;
    RETURN_IF_ERROR(GetInt64(*features, label_key.c_str(), where, &present, &label64));
  }
  if (!present) {
    return DataLoss(where + ": Example has no '" + names.label + "' feature (int64)" +
                    (names.label != kRawLabelFeature
                         ? std::string(" nor '") + kRawLabelFeature + "'"
                         : std::string()));
  }
  const int64_t stored = label64;
  label64 -= names.label_offset;
  if (label64 < 0 || label64 > std::numeric_limits<int32_t>::max()) {
    return DataLoss(where + ": label " + std::to_string(stored) +
                    (names.label_offset != 0
                         ? " minus label_offset " + std::to_string(names.label_offset) + " is " +
                               std::to_string(label64) + ","
                         : std::string()) +
                    " outside 0..2^31-1");
  }
  out->label = static_cast<int32_t>(label64);

  // Swapping hands over the parsed buffer without copying the bytes.
  ASSIGN_OR_RETURN(std::string * encoded, GetBytes(features, names.image, where));
  if (encoded) {
    out->bytes.swap(*encoded);
    out->encoded = true;
    return Status::OK();
  }
  ImageShape shape = expected;
  RETURN_IF_ERROR(GetInt64(*features, "height", where, &present, &shape.height));
  RETURN_IF_ERROR(GetInt64(*features, "width", where, &present, &shape.width));
  RETURN_IF_ERROR(GetInt64(*features, "depth", where, &present, &shape.depth));
  if (shape != expected) {
    return DataLoss(where + ": image is " + shape.ToString() + ", expected " + expected.ToString());
  }
  ASSIGN_OR_RETURN(std::string * raw, GetBytes(features, names.raw_image, where));
  if (!raw) {
    return DataLoss(where + ": Example has no '" + names.image + "' (JPEG/PNG bytes) nor '" +
                    names.raw_image + "' (raw pixels) feature");
  }
  if (static_cast<int64_t>(raw->size()) != expected.bytes()) {
    return DataLoss(where + ": '" + names.raw_image + "' has " + std::to_string(raw->size()) +
                    " bytes, expected " + std::to_string(expected.bytes()) + " (" +
                    expected.ToString() + ")");
  }
  out->bytes.swap(*raw);
  out->encoded = false;
  return Status::OK();
}

// Decodes an encoded record in place; it must decode to exactly `expected`.
Status DecodeExactly(const ImageShape& expected, const std::string& where, ImageRecord* r) {
  if (!r->encoded) return Status::OK();
  ImageShape shape;
  std::string pixels;
  RETURN_IF_ERROR(DecodeImage(r->bytes, static_cast<int>(expected.depth), where, &shape, &pixels));
  if (shape != expected) {
    return DataLoss(where + ": image is " + shape.ToString() + ", expected " + expected.ToString());
  }
  r->bytes.swap(pixels);
  r->encoded = false;
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

std::string EncodeImageFileExample(const std::string& encoded, const std::string& format,
                                   const ImageShape& shape, int64_t label) {
  tensorflow::Example example;
  tensorflow::Features* features = example.mutable_features();
  (*features->mutable_feature())["image/encoded"].mutable_bytes_list()->add_value(encoded);
  (*features->mutable_feature())["image/format"].mutable_bytes_list()->add_value(format);
  SetInt64(features, "image/class/label", label);
  SetInt64(features, "image/height", shape.height);
  SetInt64(features, "image/width", shape.width);
  return example.SerializeAsString();
}

Status ParseImageExample(const std::string& record, const ImageShape& expected,
                         const ExampleFeatures& features, const std::string& where,
                         ImageRecord* out) {
  tensorflow::Example example;
  return Parse(&example, record, expected, features, where, out);
}

Status DecodeImageExample(const std::string& record, const ImageShape& expected,
                          const std::string& where, std::string* pixels, int32_t* label) {
  ImageRecord r;
  RETURN_IF_ERROR(ParseImageExample(record, expected, ExampleFeatures(), where, &r));
  RETURN_IF_ERROR(DecodeExactly(expected, where, &r));
  pixels->swap(r.bytes);
  *label = r.label;
  return Status::OK();
}

Result<ImageExampleReader> ImageExampleReader::Open(const std::string& path,
                                                    const ImageShape& expected,
                                                    const ExampleFeatures& features,
                                                    Compression compression) {
  ASSIGN_OR_RETURN(RecordReader reader, RecordReader::Open(path, compression));
  return ImageExampleReader(std::move(reader), expected, features);
}

ImageExampleReader::ImageExampleReader(RecordReader reader, const ImageShape& expected,
                                       const ExampleFeatures& features)
    : reader_(std::move(reader)),
      expected_(expected),
      features_(features),
      scratch_(std::make_unique<tensorflow::Example>()) {}

ImageExampleReader::ImageExampleReader(ImageExampleReader&&) noexcept = default;
ImageExampleReader& ImageExampleReader::operator=(ImageExampleReader&&) noexcept = default;
ImageExampleReader::~ImageExampleReader() = default;

std::string ImageExampleReader::where() const {
  return reader_.path() + " at record offset " + std::to_string(record_offset_) + " (record " +
         std::to_string(record_index_) + ")";
}

Status ImageExampleReader::Next(ImageRecord* out) {
  const uint64_t offset = reader_.offset();
  RETURN_IF_ERROR(reader_.Next(&record_));
  record_offset_ = offset;
  ++record_index_;
  return Parse(scratch_.get(), record_, expected_, features_, where(), out);
}

Status ImageExampleReader::Next(std::string* pixels, int32_t* label) {
  RETURN_IF_ERROR(Next(&scratch_record_));
  RETURN_IF_ERROR(DecodeExactly(expected_, where(), &scratch_record_));
  pixels->swap(scratch_record_.bytes);
  *label = scratch_record_.label;
  return Status::OK();
}

}  // namespace pstrain
