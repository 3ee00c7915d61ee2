#include "worker/training/feature_batch.h"

#include <algorithm>
#include <unordered_map>

#include "common/record_io.h"

namespace pstrain {
namespace worker {

Result<FeatureBatcher> FeatureBatcher::Create(const FeatureSchema& schema,
                                              const std::vector<std::string>& input_names,
                                              const std::vector<Shape>& input_shapes) {
  FeatureBatcher b;
  for (size_t k = 0; k < input_names.size(); ++k) {
    const int f = schema.Find(input_names[k]);
    if (f < 0) {
      return InvalidArgument("model input '" + input_names[k] +
                             "' is not a feature of the input section");
    }
    const FeatureSpec& spec = schema.features[f];
    const bool ids = spec.kind == FeatureSpec::Kind::kIds;
    if (input_shapes[k].num_elements() != spec.size) {
      return InvalidArgument("model input '" + input_names[k] + "' " + input_shapes[k].ToString() +
                             " holds " + std::to_string(input_shapes[k].num_elements()) +
                             " values per example, but feature '" + spec.name + "' has " +
                             (ids ? "max_length " : "size ") + std::to_string(spec.size));
    }
    b.features_.push_back(f);
    b.shapes_.push_back(input_shapes[k]);
    b.is_ids_.push_back(ids);
  }
  return b;
}

FeatureBatch FeatureBatcher::Make(const std::vector<FeatureExample>& examples,
                                  const std::vector<size_t>& order, size_t begin,
                                  size_t count) const {
  const int64_t n = static_cast<int64_t>(count);
  FeatureBatch batch;
  batch.ids.resize(features_.size());
  for (size_t k = 0; k < features_.size(); ++k) {
    std::vector<int64_t> dims{n};
    dims.insert(dims.end(), shapes_[k].dims().begin(), shapes_[k].dims().end());
    const int64_t width = shapes_[k].num_elements();
    Tensor t = Tensor::Filled(Shape(dims), -1.0f);  // id slots: padding unless filled
    std::unordered_map<int64_t, int64_t> index;
    for (int64_t e = 0; e < n; ++e) {
      const FeatureExample& example = examples[order[begin + e]];
      float* row = t.data() + e * width;
      if (!is_ids_[k]) {
        const std::vector<float>& v = example.floats[features_[k]];
        std::copy(v.begin(), v.end(), row);
        continue;
      }
      const std::vector<int64_t>& ids = example.ids[features_[k]];
      for (size_t s = 0; s < ids.size(); ++s) {
        auto [it, added] = index.emplace(ids[s], static_cast<int64_t>(batch.ids[k].size()));
        if (added) batch.ids[k].push_back(ids[s]);
        row[s] = static_cast<float>(it->second);
      }
    }
    batch.inputs.push_back(t);
  }
  for (int64_t e = 0; e < n; ++e) batch.labels.push_back(examples[order[begin + e]].label);
  return batch;
}

Result<std::vector<FeatureExample>> ReadFeatureExamples(const std::string& path,
                                                        const FeatureSchema& schema) {
  ASSIGN_OR_RETURN(RecordReader reader, RecordReader::Open(path));
  std::vector<FeatureExample> examples;
  std::string record;
  for (;;) {
    Status next = reader.Next(&record);
    if (next.code() == StatusCode::kOutOfRange) break;
    RETURN_IF_ERROR(next);
    auto parsed = ParseFeatureExample(record, schema, static_cast<int64_t>(examples.size()));
    if (!parsed.ok()) return parsed.status().WithContext(path);
    examples.push_back(std::move(parsed).value());
  }
  if (examples.empty()) return InvalidArgument(path + " holds no examples");
  return examples;
}

}  // namespace worker
}  // namespace pstrain
