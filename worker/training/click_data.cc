#include "worker/training/click_data.h"

#include <algorithm>
#include <numeric>

#include "common/record_io.h"

namespace pstrain {
namespace worker {
namespace {

Result<std::string> PathOf(const ConfigNode& input, const std::string& key) {
  ASSIGN_OR_RETURN(std::string path, input.GetString(key));
  if (path.empty()) return input.Error("field '" + key + "' must name a TFRecord file");
  return path;
}

std::string Prefixed(const std::string& data_dir, const std::string& path) {
  return data_dir.empty() ? path : data_dir + "/" + path;
}

}  // namespace

Result<int64_t> ClickData::CountTrainExamples(const ConfigNode& config,
                                              const std::string& data_dir) {
  ASSIGN_OR_RETURN(ConfigNode input, config.Child("input"));
  ASSIGN_OR_RETURN(std::string train_path, PathOf(input, "train_tfrecord"));
  return CountRecords(Prefixed(data_dir, train_path));
}

std::vector<const Tensor*> InputPointers(const FeatureBatch& batch) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : batch.inputs) out.push_back(&t);
  return out;
}

Result<ClickData> ClickData::Read(const ConfigNode& config, const Model& model,
                                  const std::string& data_dir, ClickShard shard, uint64_t seed) {
  if (model.num_classes() != 2) {
    return InvalidArgument("a model with tables is a click model: its loss needs 2 classes, got " +
                           std::to_string(model.num_classes()));
  }
  if (shard.count < 0 || shard.index < 0 || (shard.count > 0 && shard.index >= shard.count)) {
    return InvalidArgument("click log shard " + std::to_string(shard.index) + " of " +
                           std::to_string(shard.count) + ": expected 0 <= index < count");
  }
  ASSIGN_OR_RETURN(ConfigNode input, config.Child("input"));
  RETURN_IF_ERROR(input.CheckKeys({"train_tfrecord", "test_tfrecord", "label", "features"}));
  ClickData d;
  ASSIGN_OR_RETURN(d.schema_, FeatureSchema::FromConfig(input));
  ASSIGN_OR_RETURN(d.batcher_,
                   FeatureBatcher::Create(d.schema_, model.input_names(), model.input_shapes()));
  ASSIGN_OR_RETURN(std::string train_path, PathOf(input, "train_tfrecord"));
  ASSIGN_OR_RETURN(std::string test_path, PathOf(input, "test_tfrecord"));
  std::vector<FeatureExample> train;  // none for an evaluator
  if (shard.count > 0) {
    ASSIGN_OR_RETURN(train, ReadFeatureExamples(Prefixed(data_dir, train_path), d.schema_));
    if (train.empty()) return input.Error("'" + train_path + "' holds no examples");
  }
  ASSIGN_OR_RETURN(d.test_, ReadFeatureExamples(Prefixed(data_dir, test_path), d.schema_));
  if (d.test_.empty()) return input.Error("'" + test_path + "' holds no examples");
  if (shard.count == 0) return d;  // evaluation only
  d.train_total_ = static_cast<int64_t>(train.size());
  for (size_t i = shard.index; i < train.size(); i += shard.count) {
    d.train_.push_back(std::move(train[i]));
  }
  if (d.train_.empty()) {
    return input.Error("'" + train_path + "' holds " + std::to_string(train.size()) +
                       " examples: none for shard " + std::to_string(shard.index) + " of " +
                       std::to_string(shard.count));
  }
  d.order_.resize(d.train_.size());
  std::iota(d.order_.begin(), d.order_.end(), 0);
  d.shuffle_.seed(seed);
  d.next_ = static_cast<int64_t>(d.order_.size());  // the first batch shuffles
  return d;
}

FeatureBatch ClickData::Next(int64_t batch_size) {
  const int64_t examples = static_cast<int64_t>(order_.size());
  const int64_t count = std::min(batch_size, examples);
  if (next_ + count > examples) {
    std::shuffle(order_.begin(), order_.end(), shuffle_);
    next_ = 0;
  }
  FeatureBatch batch = batcher_.Make(train_, order_, next_, count);
  next_ += count;
  return batch;
}

Result<Evaluation> ClickData::Evaluate(
    Model* model, int64_t batch_size,
    const std::function<Status(const FeatureBatch&)>& gather) const {
  std::vector<size_t> order(test_.size());
  std::iota(order.begin(), order.end(), 0);
  EvaluationTally tally;
  const size_t per_batch = static_cast<size_t>(batch_size);
  for (size_t begin = 0; begin < order.size(); begin += per_batch) {
    const size_t count = std::min(per_batch, order.size() - begin);
    const FeatureBatch batch = batcher_.Make(test_, order, begin, count);
    RETURN_IF_ERROR(gather(batch));
    tally.Add(*model, model->Forward(InputPointers(batch), batch.labels, false, nullptr),
              batch.labels);
  }
  return tally.Finish();
}

}  // namespace worker
}  // namespace pstrain
