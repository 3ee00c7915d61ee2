#include "worker/training/table_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "ps/variable_store.h"
#include "worker/training/embedding_tables.h"
#include "worker/training/evaluation.h"
#include "worker/training/gradient_preparation.h"
#include "worker/training/train_config.h"

namespace pstrain {
namespace worker {
namespace {

using Clock = std::chrono::steady_clock;

// What a run holds: the model, its dense store and tables, the examples.
struct TableRun {
  std::unique_ptr<Model> model;
  TrainConfig train;
  std::unique_ptr<ps::VariableStore> store;
  std::unique_ptr<EmbeddingTables> tables;
  FeatureBatcher batcher;
  std::vector<FeatureExample> train_examples, test_examples;
};

Result<std::string> PathOf(const ConfigNode& input, const std::string& key) {
  ASSIGN_OR_RETURN(std::string path, input.GetString(key));
  if (path.empty()) return input.Error("field '" + key + "' must name a TFRecord file");
  return path;
}

Result<TableRun> Prepare(const ConfigNode& config, const TrainerOptions& o) {
  RETURN_IF_ERROR(config.CheckKeys({"model", "train", "input", "tables"}));
  ASSIGN_OR_RETURN(ConfigNode model_node, config.Child("model"));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::FromConfig(model_node));
  ASSIGN_OR_RETURN(ConfigNode train_node, config.Child("train"));
  ASSIGN_OR_RETURN(TrainConfig train, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(std::unique_ptr<ps::VariableStore> store,
                   ps::VariableStore::FromConfig(train_node));
  ASSIGN_OR_RETURN(ConfigNode input, config.Child("input"));
  RETURN_IF_ERROR(input.CheckKeys({"train_tfrecord", "test_tfrecord", "label", "features"}));
  ASSIGN_OR_RETURN(FeatureSchema schema, FeatureSchema::FromConfig(input));
  ASSIGN_OR_RETURN(FeatureBatcher batcher,
                   FeatureBatcher::Create(schema, model->input_names(), model->input_shapes()));
  const std::string prefix = o.data_dir.empty() ? "" : o.data_dir + "/";
  ASSIGN_OR_RETURN(std::string train_path, PathOf(input, "train_tfrecord"));
  ASSIGN_OR_RETURN(std::string test_path, PathOf(input, "test_tfrecord"));
  ASSIGN_OR_RETURN(auto train_examples, ReadFeatureExamples(prefix + train_path, schema));
  ASSIGN_OR_RETURN(auto test_examples, ReadFeatureExamples(prefix + test_path, schema));
  model->InitVariables(train.seed);
  ASSIGN_OR_RETURN(ConfigNode tables_node, config.Child("tables"));
  ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingTables> tables,
                   EmbeddingTables::Create(tables_node, model.get(), o.max_table_rows));
  for (Variable* v : model->trainable_variables()) {
    if (!tables->Holds(v)) RETURN_IF_ERROR(store->AddVariable(v->name, v->value));
  }
  return TableRun{std::move(model),        train,   std::move(store),
                  std::move(tables),       batcher, std::move(train_examples),
                  std::move(test_examples)};
}

std::vector<const Tensor*> Pointers(const FeatureBatch& batch) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : batch.inputs) out.push_back(&t);
  return out;
}

// Accuracy, loss, AUC and log loss over the test examples; tables only read.
Result<Evaluation> EvaluateClicks(TableRun* run, double* log_loss) {
  if (run->model->num_classes() != 2) {
    return InvalidArgument("a model with tables is a click model: its loss needs 2 classes, got " +
                           std::to_string(run->model->num_classes()));
  }
  std::vector<size_t> order(run->test_examples.size());
  std::iota(order.begin(), order.end(), 0);
  Evaluation e;
  ClickScores scores;
  double loss_sum = 0.0;
  int64_t correct = 0;
  const size_t step = static_cast<size_t>(run->train.batch_size);
  for (size_t begin = 0; begin < order.size(); begin += step) {
    const size_t count = std::min(step, order.size() - begin);
    const FeatureBatch batch = run->batcher.Make(run->test_examples, order, begin, count);
    RETURN_IF_ERROR(run->tables->Gather(batch, run->store->global_step(), /*training=*/false));
    loss_sum += run->model->Forward(Pointers(batch), batch.labels, false, nullptr) * count;
    correct += run->model->CountCorrect(batch.labels);
    scores.Add(run->model->logits(), batch.labels);
    e.examples += static_cast<int64_t>(count);
  }
  e.accuracy = static_cast<double>(correct) / e.examples;
  e.loss = loss_sum / e.examples;
  e.auc = scores.Auc();
  *log_loss = scores.LogLoss();
  return e;
}

// One step on the batch; returns its mean loss.
Result<float> Step(TableRun* run, const FeatureBatch& batch, std::mt19937_64* rng) {
  const int64_t step = run->store->global_step();
  RETURN_IF_ERROR(run->tables->Gather(batch, step, /*training=*/true));
  const float loss = run->model->Forward(Pointers(batch), batch.labels, true, rng);
  if (!std::isfinite(loss)) {
    return Internal("step " + std::to_string(step) + ": the loss is " + std::to_string(loss) +
                    "; training diverged (lower the learning rate)");
  }
  run->model->Backward();
  PrepareGradients(run->train, run->model.get());
  std::vector<std::pair<std::string, Tensor>> grads;
  for (Variable* v : run->model->trainable_variables()) {
    if (!run->tables->Holds(v)) grads.emplace_back(v->name, v->grad);
  }
  RETURN_IF_ERROR(run->store->ApplyGradients(grads));
  RETURN_IF_ERROR(run->tables->Apply(batch, step));
  run->tables->Evict(step);
  return loss;
}

void LogEvaluation(int64_t step, const Evaluation& e, double log_loss) {
  LOG(INFO) << "trainer: step " << step << ": test AUC " << e.auc << ", test log loss " << log_loss
            << ", accuracy " << e.accuracy << " (" << e.examples << " examples)";
}

}  // namespace

Result<TrainResult> TrainWithTables(const TrainerOptions& o, const ConfigNode& config) {
  ASSIGN_OR_RETURN(TableRun run, Prepare(config, o));
  LOG(INFO) << "trainer: " << run.model->Summary();
  const int64_t batch_size = run.train.batch_size;
  const int64_t examples = static_cast<int64_t>(run.train_examples.size());
  const int64_t steps_per_epoch = std::max<int64_t>(1, examples / batch_size);
  const int64_t epochs = o.epochs > 0 ? o.epochs : run.train.epochs;
  const int64_t max_steps = o.max_steps > 0           ? o.max_steps
                            : run.train.max_steps > 0 ? run.train.max_steps
                                                      : epochs * steps_per_epoch;
  std::mt19937_64 rng(run.train.seed);
  std::vector<size_t> order(run.train_examples.size());
  std::iota(order.begin(), order.end(), 0);
  const auto start = Clock::now();
  double loss_sum = 0.0;
  int64_t losses = 0;
  TrainResult result;
  double log_loss = 0.0;
  while (run.store->global_step() < max_steps) {
    const int64_t step = run.store->global_step();
    const int64_t slot = step % steps_per_epoch;
    if (slot == 0) std::shuffle(order.begin(), order.end(), rng);
    const FeatureBatch batch =
        run.batcher.Make(run.train_examples, order, slot * batch_size,
                         std::min<int64_t>(batch_size, examples - slot * batch_size));
    auto loss = Step(&run, batch, &rng);
    if (!loss.ok()) return loss.status().WithContext("trainer");
    loss_sum += *loss;
    ++losses;
    const int64_t now = run.store->global_step();
    if ((o.log_every_n_steps > 0 && now % o.log_every_n_steps == 0) || now == max_steps) {
      LOG(INFO) << "trainer: step " << now << "/" << max_steps << ", loss " << loss_sum / losses
                << ", tables: " << run.tables->Summary();
      loss_sum = 0.0;
      losses = 0;
    }
    if ((o.eval_every_n_steps > 0 && now % o.eval_every_n_steps == 0) || now == max_steps) {
      ASSIGN_OR_RETURN(Evaluation e, EvaluateClicks(&run, &log_loss));
      LogEvaluation(now, e, log_loss);
      result.test_accuracy = e.accuracy;
      result.test_loss = e.loss;
      result.test_auc = e.auc;
      result.test_log_loss = log_loss;
    }
  }
  result.global_step = run.store->global_step();
  result.checkpointed = false;
  result.train_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace worker
}  // namespace pstrain
