// A click log as a model of named inputs reads it: the config's `input` section names two
// TFRecord files of feature Examples (common/data/feature_example.h); training batches come from
// one shard of the training file (every num_shards-th example, as TensorFlow's Dataset.shard),
// reshuffled every epoch, and evaluation reads the whole test file in order. The one-process
// trainer (click_input.h) reads all of it as shard 0 of 1; a distributed worker its own shard
// (worker/distributed/click_role_input.h).
//
//   input:
//     train_tfrecord: data/ctr/train.tfrecord
//     test_tfrecord: data/ctr/test.tfrecord
//     label: label
//     features: [...]
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "worker/network/model.h"
#include "worker/training/evaluation.h"
#include "worker/training/feature_batch.h"

namespace pstrain {
namespace worker {

// Which training examples a reader takes: every count-th from index; count 0 reads none (an
// evaluator's).
struct ClickShard {
  int index = 0;
  int count = 1;
};

class ClickData {
 public:
  // Reads the config's `input` section for `model` (a two-class model whose named inputs are
  // features of the schema); `data_dir`, when not empty, prefixes the TFRecord paths. Errors name
  // the field, feature, file or record; a shard without a single example is an error too.
  static Result<ClickData> Read(const ConfigNode& config, const Model& model,
                                const std::string& data_dir, ClickShard shard, uint64_t seed);

  // The training file's examples, counted without parsing them (a distributed role's steps per
  // epoch); errors name the field or the file.
  static Result<int64_t> CountTrainExamples(const ConfigNode& config, const std::string& data_dir);

  const FeatureSchema& schema() const { return schema_; }
  // The training file's examples, all shards (global steps per epoch count these).
  int64_t train_examples() const { return train_total_; }
  // This shard's next `batch_size` examples (fewer when the shard holds fewer); an epoch's last
  // partial batch is dropped as the reshuffle begins.
  FeatureBatch Next(int64_t batch_size);
  // The whole test file in batches of `batch_size`, in order: `gather` readies each batch's rows
  // (a table lookup) before the model's evaluation-mode forward.
  Result<Evaluation> Evaluate(Model* model, int64_t batch_size,
                              const std::function<Status(const FeatureBatch&)>& gather) const;

 private:
  FeatureSchema schema_;
  FeatureBatcher batcher_;
  std::vector<FeatureExample> train_, test_;  // train_: this shard's examples only
  int64_t train_total_ = 0;
  std::vector<size_t> order_;  // this epoch's order of train_
  int64_t next_ = 0;           // the next batch's first place in order_
  std::mt19937_64 shuffle_;
};

// The training inputs' model pointers, as Model::Forward takes named inputs.
std::vector<const Tensor*> InputPointers(const FeatureBatch& batch);

}  // namespace worker
}  // namespace pstrain
