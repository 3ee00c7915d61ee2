// Examples of named features as click logs store them (Criteo's shape: dense float features,
// categorical int64 id lists, a 0/1 label), read from tf.train.Example records by the names the
// config gives, as TensorFlow's parse_example reads them with FixedLenFeature (floats) and
// VarLenFeature (id lists). Ids are hashed into the feature's table size when it has one, as
// TensorFlow's categorical_column_with_hash_bucket does, so that the id space can be any int64.
//
// Every record is hostile: a missing feature, a feature of the wrong kind or length, a negative
// id or a list longer than the configured maximum is an error naming the feature and the
// record's index, and nothing is kept of that record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace pstrain {

struct FeatureSpec {
  enum class Kind { kFloats, kIds };
  std::string name;
  Kind kind = Kind::kFloats;
  // kFloats: exactly this many values. kIds: at most this many (max list length), at least one.
  int64_t size = 1;
  // kIds: ids are hashed into [0, hash_buckets); 0 keeps them as they are (they must be >= 0).
  int64_t hash_buckets = 0;
};

// The `features:` list and the label's name of an `input:` section:
//   label: label
//   features:
//     - {name: dense, type: float, size: 13}
//     - {name: C1, type: int64, max_length: 1, hash_buckets: 100000}
struct FeatureSchema {
  std::string label = "label";
  std::vector<FeatureSpec> features;

  static Result<FeatureSchema> FromConfig(const ConfigNode& input_node);
  // The index of feature `name` in `features`, or -1.
  int Find(const std::string& name) const;
};

// One parsed record: per feature in schema order, its floats or its (hashed) ids.
struct FeatureExample {
  std::vector<std::vector<float>> floats;  // kFloats features; empty for kIds
  std::vector<std::vector<int64_t>> ids;   // kIds features; empty for kFloats
  int32_t label = 0;                       // 0 or 1
};

// Parses `record` (a serialized tf.train.Example); `record_index` names it in errors.
Result<FeatureExample> ParseFeatureExample(const std::string& record, const FeatureSchema& schema,
                                           int64_t record_index);

// The bucket TensorFlow-style hashing puts `id` in: a 64-bit mix of the id, modulo `buckets`.
int64_t HashId(int64_t id, int64_t buckets);

// Writes one record of `schema`'s features (pstrain-synth-ctr, tests): `example` holds the
// values per feature as ParseFeatureExample returns them (ids before hashing).
std::string EncodeFeatureExample(const FeatureSchema& schema, const FeatureExample& example);

}  // namespace pstrain
