#include "common/data/feature_example.h"

#include "common/data/example.pb.h"

namespace pstrain {
namespace {

Status RecordError(int64_t record_index, const std::string& feature, const std::string& what) {
  return InvalidArgument("record " + std::to_string(record_index) + ": feature '" + feature + "' " +
                         what);
}

Status ReadFloats(const tensorflow::Feature& f, const FeatureSpec& spec, int64_t index,
                  std::vector<float>* out) {
  if (!f.has_float_list()) return RecordError(index, spec.name, "is not a float list");
  if (f.float_list().value_size() != spec.size) {
    return RecordError(index, spec.name,
                       "has " + std::to_string(f.float_list().value_size()) + " floats, expected " +
                           std::to_string(spec.size));
  }
  out->assign(f.float_list().value().begin(), f.float_list().value().end());
  return Status::OK();
}

Status ReadIds(const tensorflow::Feature& f, const FeatureSpec& spec, int64_t index,
               std::vector<int64_t>* out) {
  if (!f.has_int64_list()) return RecordError(index, spec.name, "is not an int64 list");
  const int n = f.int64_list().value_size();
  if (n < 1 || n > spec.size) {
    return RecordError(
        index, spec.name,
        "has " + std::to_string(n) + " ids, expected 1 to max_length " + std::to_string(spec.size));
  }
  out->clear();
  for (int64_t id : f.int64_list().value()) {
    if (id < 0) {
      return RecordError(index, spec.name, "holds the negative id " + std::to_string(id));
    }
    out->push_back(spec.hash_buckets > 0 ? HashId(id, spec.hash_buckets) : id);
  }
  return Status::OK();
}

Result<FeatureSpec> SpecFromConfig(const ConfigNode& node) {
  FeatureSpec spec;
  ASSIGN_OR_RETURN(spec.name, node.GetString("name"));
  ASSIGN_OR_RETURN(std::string type, node.GetString("type"));
  if (type == "float") {
    RETURN_IF_ERROR(node.CheckKeys({"name", "type", "size"}));
    spec.kind = FeatureSpec::Kind::kFloats;
    ASSIGN_OR_RETURN(spec.size, node.GetInt("size", 1));
    if (spec.size < 1)
      return node.Error("field 'size' must be >= 1, got " + std::to_string(spec.size));
    return spec;
  }
  if (type != "int64") return node.Error("field 'type' must be float or int64, got '" + type + "'");
  RETURN_IF_ERROR(node.CheckKeys({"name", "type", "max_length", "hash_buckets"}));
  spec.kind = FeatureSpec::Kind::kIds;
  ASSIGN_OR_RETURN(spec.size, node.GetInt("max_length", 1));
  if (spec.size < 1) {
    return node.Error("field 'max_length' must be >= 1, got " + std::to_string(spec.size));
  }
  ASSIGN_OR_RETURN(spec.hash_buckets, node.GetInt("hash_buckets", 0));
  if (spec.hash_buckets < 0) {
    return node.Error("field 'hash_buckets' must be >= 0, got " +
                      std::to_string(spec.hash_buckets));
  }
  return spec;
}

}  // namespace

int64_t HashId(int64_t id, int64_t buckets) {
  uint64_t x = static_cast<uint64_t>(id) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<int64_t>(x % static_cast<uint64_t>(buckets));
}

Result<FeatureSchema> FeatureSchema::FromConfig(const ConfigNode& input_node) {
  FeatureSchema schema;
  ASSIGN_OR_RETURN(schema.label, input_node.GetString("label", schema.label));
  ASSIGN_OR_RETURN(ConfigNode list, input_node.Child("features"));
  if (!list.IsSequence() || list.size() == 0) return list.Error("must be a non-empty list");
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(FeatureSpec spec, SpecFromConfig(list.At(i)));
    if (schema.Find(spec.name) >= 0 || spec.name == schema.label) {
      return list.At(i).Error("feature '" + spec.name + "' is named twice (or is the label)");
    }
    schema.features.push_back(spec);
  }
  return schema;
}

int FeatureSchema::Find(const std::string& name) const {
  for (size_t i = 0; i < features.size(); ++i) {
    if (features[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Result<FeatureExample> ParseFeatureExample(const std::string& record, const FeatureSchema& schema,
                                           int64_t record_index) {
  tensorflow::Example example;
  if (!example.ParseFromString(record)) {
    return InvalidArgument("record " + std::to_string(record_index) +
                           ": not a valid tf.train.Example (" + std::to_string(record.size()) +
                           " bytes)");
  }
  const auto& features = example.features().feature();
  FeatureExample out;
  out.floats.resize(schema.features.size());
  out.ids.resize(schema.features.size());
  for (size_t i = 0; i < schema.features.size(); ++i) {
    const FeatureSpec& spec = schema.features[i];
    auto it = features.find(spec.name);
    if (it == features.end()) return RecordError(record_index, spec.name, "is missing");
    if (spec.kind == FeatureSpec::Kind::kFloats) {
      RETURN_IF_ERROR(ReadFloats(it->second, spec, record_index, &out.floats[i]));
    } else {
      RETURN_IF_ERROR(ReadIds(it->second, spec, record_index, &out.ids[i]));
    }
  }
  auto label = features.find(schema.label);
  if (label == features.end())
    return RecordError(record_index, schema.label, "(the label) is missing");
  if (!label->second.has_int64_list() || label->second.int64_list().value_size() != 1 ||
      (label->second.int64_list().value(0) != 0 && label->second.int64_list().value(0) != 1)) {
    return RecordError(record_index, schema.label, "(the label) must be one int64, 0 or 1");
  }
  out.label = static_cast<int32_t>(label->second.int64_list().value(0));
  return out;
}

std::string EncodeFeatureExample(const FeatureSchema& schema, const FeatureExample& example) {
  tensorflow::Example proto;
  auto* features = proto.mutable_features()->mutable_feature();
  for (size_t i = 0; i < schema.features.size(); ++i) {
    tensorflow::Feature& f = (*features)[schema.features[i].name];
    if (schema.features[i].kind == FeatureSpec::Kind::kFloats) {
      for (float v : example.floats[i]) f.mutable_float_list()->add_value(v);
    } else {
      for (int64_t id : example.ids[i]) f.mutable_int64_list()->add_value(id);
    }
  }
  (*features)[schema.label].mutable_int64_list()->add_value(example.label);
  std::string bytes;
  proto.SerializeToString(&bytes);
  return bytes;
}

}  // namespace pstrain
