#include "worker/training/training_setup.h"

#include "common/data/idx.h"
#include "worker/memory/growth_allocator.h"
#include "worker/training/input/input_pipeline.h"
#include "worker/training/input/preprocess.h"

namespace pstrain {
namespace worker {

Result<TrainConfig> ReadTrainConfig(const ConfigNode& train) {
  RETURN_IF_ERROR(train.CheckKeys({"seed", "batch_size", "epochs", "max_steps", "optimizer",
                                   "learning_rate", "clipping", "weight_decay"}));
  TrainConfig c;
  ASSIGN_OR_RETURN(int64_t seed, train.GetInt("seed", 1));
  c.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(c.batch_size, train.GetInt("batch_size", 128));
  ASSIGN_OR_RETURN(c.epochs, train.GetInt("epochs", 1));
  ASSIGN_OR_RETURN(c.max_steps, train.GetInt("max_steps", 0));
  ASSIGN_OR_RETURN(c.weight_decay, train.GetDouble("weight_decay", 0.0));
  if (c.batch_size < 1) return train.Error("field 'batch_size' must be >= 1");
  if (c.epochs < 1) return train.Error("field 'epochs' must be >= 1");
  if (c.weight_decay < 0) return train.Error("field 'weight_decay' must be >= 0");
  if (train.Has("clipping")) {
    ASSIGN_OR_RETURN(ConfigNode clip, train.Child("clipping"));
    ASSIGN_OR_RETURN(c.clipping, ps::ClippingOptions::FromConfig(clip));
  }
  return c;
}

Result<InputOptions> ReadInputOptions(const ConfigNode& config, const std::string& data_dir) {
  InputOptions input;
  if (config.Has("input")) {
    ASSIGN_OR_RETURN(ConfigNode input_node, config.Child("input"));
    ASSIGN_OR_RETURN(input, InputOptions::FromConfig(input_node));
  }
  if (!data_dir.empty()) input.data_dir = data_dir;
  if (input.source == InputSource::kIdx) {
    ASSIGN_OR_RETURN(ImageSet set, LoadFashionMnist(input.data_dir, Split::kTrain));
    auto shared = std::make_shared<const ImageSet>(std::move(set));
    if (input.mean.empty()) {
      Normalization norm = ComputeNormalization(*shared);
      input.mean = norm.mean;
      input.stddev = norm.stddev;
    }
    input.images = shared;
  } else if (input.mean.empty()) {
    LOG(WARNING) << "input.mean/std not set for TFRecord input; using x/255 only";
  }
  return input;
}

Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed) {
  ASSIGN_OR_RETURN(auto pipeline, InputPipeline::Create(input.ForEvaluation(), 1000, 0, 1, seed));
  Evaluation e;
  double loss_sum = 0;
  int64_t correct = 0;
  for (;;) {
    Result<Batch> batch = pipeline->Next();
    if (batch.status().code() == StatusCode::kOutOfRange) break;
    if (!batch.ok()) return batch.status().WithContext("evaluation input");
    const int64_t n = batch->images.dim(0);
    loss_sum += model->Forward(batch->images, batch->labels, false, nullptr) * n;
    correct += model->CountCorrect(batch->labels);
    e.examples += n;
  }
  if (e.examples == 0) return FailedPrecondition("the evaluation set is empty");
  e.accuracy = static_cast<double>(correct) / e.examples;
  e.loss = loss_sum / e.examples;
  return e;
}

void PrepareGradients(const TrainConfig& config, Model* model) {
  std::vector<Tensor*> grads;
  for (Variable* v : model->trainable_variables()) {
    if (config.weight_decay > 0 && v->value.shape().rank() > 1) {
      const float wd = static_cast<float>(config.weight_decay);
      float* g = v->grad.data();
      const float* w = v->value.data();
      const int64_t n = v->grad.size();
#pragma omp parallel for simd schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) g[i] += wd * w[i];
    }
    grads.push_back(&v->grad);
  }
  // The worker's side of clipping (ps::ClippingOptions::WorkerSide): the global norm.
  const ps::ClippingOptions worker_side = config.clipping.WorkerSide();
  if (worker_side.by_global_norm) ps::ClipByGlobalNorm(*worker_side.by_global_norm, grads);
}

ProgressWindow::Report ProgressWindow::Take() {
  const double secs = std::max(std::chrono::duration<double>(Clock::now() - start_).count(), 1e-9);
  Report r;
  r.steps = steps_;
  r.mean_loss = steps_ ? loss_ / steps_ : 0.0;
  r.examples_per_sec = examples_ / secs;
  r.steps_per_sec = steps_ / secs;
  start_ = Clock::now();
  steps_ = examples_ = 0;
  loss_ = 0;
  return r;
}

void WriteProgressScalars(SummaryWriter* log, int64_t step, float learning_rate,
                          const ProgressWindow::Report& report) {
  log->AddScalar("loss", step, static_cast<float>(report.mean_loss));
  log->AddScalar("learning_rate", step, learning_rate);
  log->AddScalar("examples_per_sec", step, static_cast<float>(report.examples_per_sec));
  log->AddScalar("global_step/sec", step, static_cast<float>(report.steps_per_sec));
}

void ReportDeviceMemory(const ComputeDevice& device, const std::string& who, int64_t step,
                        SummaryWriter* log) {
  AllocatorStats s;
  if (!device.MemoryStats(&s)) return;
  LOG(INFO) << who << ": step " << step << ": " << device.MemoryStatsLine();
  if (!log) return;
  const double mib = 1.0 / (1 << 20);
  log->AddScalar("gpu_memory/in_use_mib", step, static_cast<float>(s.bytes_in_use * mib));
  log->AddScalar("gpu_memory/peak_mib", step, static_cast<float>(s.peak_bytes_in_use * mib));
  log->AddScalar("gpu_memory/reserved_mib", step, static_cast<float>(s.bytes_reserved * mib));
  log->AddScalar("gpu_memory/regions", step, static_cast<float>(s.num_regions));
}

}  // namespace worker
}  // namespace pstrain
