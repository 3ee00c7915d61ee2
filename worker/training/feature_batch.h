// Batches of click examples (common/data/feature_example.h) as a model of named inputs reads
// them (worker/network/model.h): each model input is the schema feature of the same name. A float
// feature is copied as it is; an id feature becomes, per example, the index of each id among the
// batch's distinct ids (-1 pads a shorter list), and the distinct ids themselves, in the order
// first seen, are what the embedding tables gather and update (embedding_tables.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/data/feature_example.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {
namespace worker {

struct FeatureBatch {
  std::vector<Tensor> inputs;             // per model input, [N, ...its shape]
  std::vector<std::vector<int64_t>> ids;  // per model input: the distinct ids (id features only)
  std::vector<int32_t> labels;
};

class FeatureBatcher {
 public:
  // Binds each named input to its feature; an input without a feature of its name, or whose size
  // is not the feature's (floats: `size`, ids: `max_length`), is an error naming both.
  static Result<FeatureBatcher> Create(const FeatureSchema& schema,
                                       const std::vector<std::string>& input_names,
                                       const std::vector<Shape>& input_shapes);

  // The examples examples[order[begin]], ..., examples[order[begin + count - 1]].
  FeatureBatch Make(const std::vector<FeatureExample>& examples, const std::vector<size_t>& order,
                    size_t begin, size_t count) const;

 private:
  std::vector<int> features_;  // per model input: its index in the schema
  std::vector<Shape> shapes_;
  std::vector<bool> is_ids_;
};

// Every record of the TFRecord file `path`, parsed by `schema`; errors name the file and record.
Result<std::vector<FeatureExample>> ReadFeatureExamples(const std::string& path,
                                                        const FeatureSchema& schema);

}  // namespace worker
}  // namespace pstrain
