#include "worker/training/input/input_options.h"

namespace pstrain {
namespace {

Result<std::vector<float>> GetFloatList(const ConfigNode& node, const std::string& key) {
  std::vector<float> values;
  if (!node.Has(key)) return values;
  ASSIGN_OR_RETURN(std::vector<double> list, node.GetDoubleList(key));
  values.assign(list.begin(), list.end());
  return values;
}

}  // namespace

Result<InputOptions> InputOptions::FromConfig(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys({"source", "data_dir", "tfrecord_pattern", "test_tfrecord_pattern",
                                  "compression", "image_feature", "raw_image_feature",
                                  "label_feature", "label_offset", "resize", "shuffle_capacity",
                                  "min_after_dequeue", "prefetch_batches", "threads", "augment",
                                  "random_flip", "random_crop_padding", "mean", "std"}));
  InputOptions o;
  ASSIGN_OR_RETURN(std::string source, node.GetString("source", "idx"));
  if (source == "idx") {
    o.source = InputSource::kIdx;
  } else if (source == "tfrecord") {
    o.source = InputSource::kTfRecord;
  } else {
    return node.Error("source '" + source + "' is not known (expected idx or tfrecord)");
  }
  ASSIGN_OR_RETURN(o.data_dir, node.GetString("data_dir", o.data_dir));
  ASSIGN_OR_RETURN(o.tfrecord_pattern, node.GetString("tfrecord_pattern", ""));
  ASSIGN_OR_RETURN(o.test_tfrecord_pattern, node.GetString("test_tfrecord_pattern", ""));
  ASSIGN_OR_RETURN(std::string compression, node.GetString("compression", "auto"));
  Result<Compression> named = CompressionNamed(compression);
  if (!named.ok()) return node.Error(named.status().message());
  o.compression = *named;
  ASSIGN_OR_RETURN(o.shuffle_capacity, node.GetInt("shuffle_capacity", o.shuffle_capacity));
  ASSIGN_OR_RETURN(o.min_after_dequeue, node.GetInt("min_after_dequeue", o.min_after_dequeue));
  ASSIGN_OR_RETURN(int64_t prefetch, node.GetInt("prefetch_batches", o.prefetch_batches));
  ASSIGN_OR_RETURN(int64_t threads, node.GetInt("threads", o.threads));
  ASSIGN_OR_RETURN(o.features.image, node.GetString("image_feature", o.features.image));
  ASSIGN_OR_RETURN(o.features.raw_image, node.GetString("raw_image_feature", o.features.raw_image));
  ASSIGN_OR_RETURN(o.features.label, node.GetString("label_feature", o.features.label));
  ASSIGN_OR_RETURN(o.features.label_offset, node.GetInt("label_offset", 0));
  for (const std::string* name : {&o.features.image, &o.features.raw_image, &o.features.label}) {
    if (name->empty()) return node.Error("feature names must not be empty");
  }
  ASSIGN_OR_RETURN(std::string resize, node.GetString("resize", "none"));
  Result<ResizeMethod> method = ParseResizeMethod(resize);
  if (!method.ok()) return node.Error(method.status().message());
  o.resize = *method;
  ASSIGN_OR_RETURN(o.random_flip, node.GetBool("random_flip", o.random_flip));
  ASSIGN_OR_RETURN(int64_t padding, node.GetInt("random_crop_padding", 0));
  if (node.Has("augment")) {
    if (node.Has("random_flip") || node.Has("random_crop_padding")) {
      return node.Error("give augment or random_flip/random_crop_padding, not both");
    }
    ASSIGN_OR_RETURN(ConfigNode augment, node.Child("augment"));
    RETURN_IF_ERROR(augment.CheckKeys({"flip", "pad_crop"}));
    ASSIGN_OR_RETURN(o.random_flip, augment.GetBool("flip", false));
    ASSIGN_OR_RETURN(padding, augment.GetInt("pad_crop", 0));
    if (padding < 0 || padding > 1024) return augment.Error("pad_crop must be in 0..1024");
  }
  ASSIGN_OR_RETURN(o.mean, GetFloatList(node, "mean"));
  ASSIGN_OR_RETURN(o.stddev, GetFloatList(node, "std"));
  // Range-check before narrowing so a huge value is reported, not wrapped.
  if (prefetch < 1 || prefetch > 1024) return node.Error("prefetch_batches must be in 1..1024");
  if (threads < 1 || threads > 64) return node.Error("threads must be in 1..64");
  if (padding < 0 || padding > 1024) return node.Error("random_crop_padding must be in 0..1024");
  o.prefetch_batches = static_cast<int>(prefetch);
  o.threads = static_cast<int>(threads);
  o.random_crop_padding = static_cast<int>(padding);
  if (o.source == InputSource::kTfRecord && o.tfrecord_pattern.empty()) {
    return node.Error("source is tfrecord but tfrecord_pattern is empty");
  }
  Status s = o.Validate();
  if (!s.ok()) return node.Error(s.message());
  return o;
}

InputOptions InputOptions::ForEvaluation() const {
  InputOptions o = *this;
  o.split = Split::kTest;
  o.images = nullptr;
  o.tfrecord_files.clear();
  o.shuffle = false;
  o.drop_remainder = false;
  o.num_epochs = 1;
  o.random_flip = false;
  o.random_crop_padding = 0;
  o.lease = nullptr;  // every evaluator reads the whole test split
  return o;
}

Status InputOptions::Validate() const {
  if (shuffle) {
    if (min_after_dequeue < 0) {
      return InvalidArgument("min_after_dequeue is " + std::to_string(min_after_dequeue) +
                             ", expected >= 0");
    }
    if (shuffle_capacity <= min_after_dequeue) {
      return InvalidArgument("shuffle_capacity (" + std::to_string(shuffle_capacity) +
                             ") must be greater than min_after_dequeue (" +
                             std::to_string(min_after_dequeue) + ")");
    }
  }
  if (prefetch_batches < 1) return InvalidArgument("prefetch_batches must be >= 1");
  if (threads < 1) return InvalidArgument("threads must be >= 1");
  if (num_epochs < 0) return InvalidArgument("num_epochs must be >= 0 (0 repeats forever)");
  if (random_crop_padding < 0) return InvalidArgument("random_crop_padding must be >= 0");
  for (float s : stddev) {
    if (!(s > 0)) return InvalidArgument("std values must be > 0, got " + std::to_string(s));
  }
  return Status::OK();
}

}  // namespace pstrain
