#include "worker/training/click_input.h"

#include <algorithm>
#include <numeric>

#include "worker/training/onnx_table_rows.h"

namespace pstrain {
namespace worker {
namespace {

Result<std::string> PathOf(const ConfigNode& input, const std::string& key) {
  ASSIGN_OR_RETURN(std::string path, input.GetString(key));
  if (path.empty()) return input.Error("field '" + key + "' must name a TFRecord file");
  return path;
}

std::vector<const Tensor*> Pointers(const FeatureBatch& batch) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : batch.inputs) out.push_back(&t);
  return out;
}

}  // namespace

Result<std::unique_ptr<ClickInput>> ClickInput::Create(const ConfigNode& config, Model* model,
                                                       int64_t batch_size, uint64_t seed,
                                                       const std::string& data_dir,
                                                       int64_t max_table_rows) {
  if (model->num_classes() != 2) {
    return InvalidArgument("a model with tables is a click model: its loss needs 2 classes, got " +
                           std::to_string(model->num_classes()));
  }
  ASSIGN_OR_RETURN(ConfigNode input, config.Child("input"));
  RETURN_IF_ERROR(input.CheckKeys({"train_tfrecord", "test_tfrecord", "label", "features"}));
  ASSIGN_OR_RETURN(FeatureSchema schema, FeatureSchema::FromConfig(input));
  std::unique_ptr<ClickInput> in(new ClickInput());
  in->schema_ = schema;
  ASSIGN_OR_RETURN(in->batcher_,
                   FeatureBatcher::Create(schema, model->input_names(), model->input_shapes()));
  const std::string prefix = data_dir.empty() ? "" : data_dir + "/";
  ASSIGN_OR_RETURN(std::string train_path, PathOf(input, "train_tfrecord"));
  ASSIGN_OR_RETURN(std::string test_path, PathOf(input, "test_tfrecord"));
  ASSIGN_OR_RETURN(in->train_examples_, ReadFeatureExamples(prefix + train_path, schema));
  ASSIGN_OR_RETURN(in->test_examples_, ReadFeatureExamples(prefix + test_path, schema));
  if (in->train_examples_.empty()) return input.Error("'" + train_path + "' holds no examples");
  if (in->test_examples_.empty()) return input.Error("'" + test_path + "' holds no examples");
  ASSIGN_OR_RETURN(ConfigNode tables_node, config.Child("tables"));
  ASSIGN_OR_RETURN(in->tables_, EmbeddingTables::Create(tables_node, model, max_table_rows));
  in->onnx_blocker_ = OnnxExportBlocker(*in->tables_, *model, schema);
  if (!in->onnx_blocker_.empty()) {
    LOG(WARNING) << "trainer: no model.onnx will be written at the end: " << in->onnx_blocker_;
  }
  in->batch_size_ = batch_size;
  in->order_.resize(in->train_examples_.size());
  std::iota(in->order_.begin(), in->order_.end(), 0);
  in->shuffle_.seed(seed);
  in->next_ = static_cast<int64_t>(in->order_.size());  // the first batch shuffles
  return in;
}

Result<TrainingInput::Pass> ClickInput::ForwardBackward(Model* model, int64_t step,
                                                        std::mt19937_64* rng) {
  // Whole batches only: an epoch's last partial batch is dropped, as the reshuffle begins.
  const int64_t examples = static_cast<int64_t>(order_.size());
  const int64_t count = std::min(batch_size_, examples);
  if (next_ + count > examples) {
    std::shuffle(order_.begin(), order_.end(), shuffle_);
    next_ = 0;
  }
  batch_ = batcher_.Make(train_examples_, order_, next_, count);
  next_ += count;
  RETURN_IF_ERROR(tables_->Gather(batch_, step, /*training=*/true));
  Pass pass;
  pass.loss = model->Forward(Pointers(batch_), batch_.labels, true, rng);
  pass.examples = count;
  model->Backward();
  return pass;
}

Status ClickInput::AfterUpdate(int64_t step) {
  RETURN_IF_ERROR(tables_->Apply(batch_, step));
  tables_->Evict(step);
  return Status::OK();
}

Result<Evaluation> ClickInput::Evaluate(Model* model, int64_t step) {
  std::vector<size_t> order(test_examples_.size());
  std::iota(order.begin(), order.end(), 0);
  EvaluationTally tally;
  const size_t per_batch = static_cast<size_t>(batch_size_);
  for (size_t begin = 0; begin < order.size(); begin += per_batch) {
    const size_t count = std::min(per_batch, order.size() - begin);
    const FeatureBatch batch = batcher_.Make(test_examples_, order, begin, count);
    RETURN_IF_ERROR(tables_->Gather(batch, step, /*training=*/false));
    tally.Add(*model, model->Forward(Pointers(batch), batch.labels, false, nullptr), batch.labels);
  }
  return tally.Finish();
}

Status ClickInput::WriteFinal(const ConfigNode& model_node, Model* model,
                              const std::string& train_dir) {
  if (!onnx_blocker_.empty()) return Status::OK();  // said at the start
  std::map<std::string, Tensor> weights;
  for (const Variable* v : model->variables()) weights[v->name] = v->value;
  const std::string path = train_dir + "/model.onnx";
  RETURN_IF_ERROR(WriteOnnx(model_node, weights, OnnxExportOptions{}, path,
                            OnnxTableRowsOf(*tables_, schema_)));
  LOG(INFO) << "trainer: exported the model with its tables to " << path
            << " (inputs: the features by name, ids hashed into their hash_buckets)";
  return Status::OK();
}

}  // namespace worker
}  // namespace pstrain
