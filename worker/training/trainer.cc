#include "worker/training/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/partial_restore.h"
#include "common/checkpoint/safetensors.h"
#include "common/checkpoint/save_trigger.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/signal_watch.h"
#include "common/summary/summary_writer.h"
#include "ps/variable_store.h"
#include "worker/network/model.h"
#include "worker/training/device_memory_report.h"
#include "worker/training/evaluation.h"
#include "worker/training/gradient_preparation.h"
#include "worker/training/input/input_pipeline.h"
#include "worker/training/model_graph.h"
#include "worker/training/model_health.h"
#include "worker/training/progress_line.h"
#include "worker/training/progress_window.h"
#include "worker/training/table_trainer.h"
#include "worker/training/tf_layout.h"
#include "worker/training/train_config.h"
#include "worker/training/warm_start.h"

namespace pstrain {
namespace worker {
namespace {

using Clock = std::chrono::steady_clock;

// SIGINT or SIGTERM, watched by the program's main (tools/train_main.cc) before any thread.
bool StopRequested() { return SignalReceived(SIGINT) || SignalReceived(SIGTERM); }

}  // namespace

Result<TrainResult> Train(const TrainerOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  if (config.Has("tables")) return TrainWithTables(o, config);  // a click model
  RETURN_IF_ERROR(config.CheckKeys({"model", "train", "input"}));
  // First: a wrong device flag or a missing GPU stops the run before data is loaded.
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeDevice> device, ComputeDevice::Open(o.device, "trainer"));
  ASSIGN_OR_RETURN(ConfigNode model_node, config.Child("model"));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::FromConfig(model_node));
  ASSIGN_OR_RETURN(ConfigNode train_node, config.Child("train"));
  ASSIGN_OR_RETURN(TrainConfig tc, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(std::unique_ptr<ps::VariableStore> store,
                   ps::VariableStore::FromConfig(train_node));
  ASSIGN_OR_RETURN(InputOptions input, ReadInputOptions(config, o.data_dir));
  LOG(INFO) << "trainer: " << model->Summary();

  model->InitVariables(tc.seed);
  std::map<std::string, Tensor> state;  // what a checkpoint holds
  for (Variable* v : model->variables()) {
    if (v->trainable)
      RETURN_IF_ERROR(store->AddVariable(v->name, v->value));
    else
      state[v->name] = v->value;
  }
  for (auto& [name, t] : store->StateTensors()) state[name] = t;

  CheckpointManager checkpoints(o.train_dir, o.max_to_keep);
  ASSIGN_OR_RETURN(TfLayout tf_layout, TfLayoutOf(model_node));
  checkpoints.set_tf_layout(std::move(tf_layout));  // a TensorFlow checkpoint's dense kernels
  Result<CheckpointData> restored = FailedPrecondition("nothing to restore");
  if (!o.checkpoint_path.empty()) {
    restored = checkpoints.Restore(o.checkpoint_path);
    if (!restored.ok()) return restored.status();
  } else if (checkpoints.LatestPath().ok()) {
    restored = checkpoints.RestoreLatest();
    if (!restored.ok()) return restored.status();
  }
  if (restored.ok()) {
    RestoreFilter filter;
    filter.exclude = SplitList(o.restore_exclude);
    ASSIGN_OR_RETURN(RestoreReport report, RestoreInto(restored.value(), filter, &state));
    store->set_global_step(restored->global_step);
    LOG(INFO) << "trainer: restored " << report.restored.size() << " tensors at global step "
              << restored->global_step << " from "
              << (o.checkpoint_path.empty() ? o.train_dir : o.checkpoint_path)
              << (IsFromTfBundle(restored.value()) ? " (a TensorFlow checkpoint)" : "")
              << (report.filtered.empty()
                      ? ""
                      : " (" + std::to_string(report.filtered.size()) +
                            " left at their initial values by --restore_exclude)");
    if (!report.missing.empty()) {
      LOG(WARNING) << "trainer: " << report.missing.size() << " tensors were not in the "
                   << "checkpoint and keep their initial values, e.g. " << report.missing[0];
    }
  }

  // After the restore: the device mirrors start from the values training resumes from.
  RETURN_IF_ERROR(device->Place(model.get()));

  ASSIGN_OR_RETURN(auto pipeline, InputPipeline::Create(input, tc.batch_size, 0, 1,
                                                        tc.seed + store->global_step()));
  const int64_t steps_per_epoch =
      std::max<int64_t>(1, pipeline->examples_per_epoch() / tc.batch_size);
  const int64_t epochs = o.epochs > 0 ? o.epochs : tc.epochs;
  const int64_t max_steps =
      o.max_steps > 0 ? o.max_steps : (tc.max_steps > 0 ? tc.max_steps : epochs * steps_per_epoch);

  std::unique_ptr<SummaryWriter> train_log, eval_log;
  if (!o.logdir.empty()) {
    ASSIGN_OR_RETURN(train_log, SummaryWriter::Open(o.logdir, "train"));
    ASSIGN_OR_RETURN(eval_log, SummaryWriter::Open(o.logdir, "eval"));
    train_log->AddText(
        "config", store->global_step(),
        "```\n" + config.ToYaml() + "\n```\n\ncommand line: `" + o.command_line + "`");
    // The Graphs tab; a diagnostic, never fatal. One process and no servers: every variable sits
    // beside its layers, on the device as TensorFlow names a local one.
    ModelGraphOptions local;
    local.num_ps = 0;
    local.worker_device = std::string("/job:localhost/replica:0/task:0/device:") +
                          DeviceName(device->device()) + ":0";
    auto graph = ModelGraphDef(model_node, local);
    if (graph.ok()) {
      train_log->AddGraph(*graph);
    } else {
      LOG(WARNING) << "trainer: no graph for TensorBoard: " << graph.status().ToString();
    }
  }
  LOG(INFO) << "trainer: training " << model->name() << " from step " << store->global_step()
            << " to " << max_steps << " (" << steps_per_epoch << " steps per epoch, batch "
            << tc.batch_size << ", " << store->optimizer().name() << ")";
  if (!o.logdir.empty()) {
    LOG(INFO) << "trainer: TensorBoard logs in " << o.logdir
              << "; watch with: tensorboard --logdir " << o.logdir;
  }

  auto save = [&](int64_t step) -> Status {
    CheckpointData data;
    data.global_step = step;
    data.tensors = state;
    data.metadata["model"] = model->name();
    ASSIGN_OR_RETURN(std::string path, checkpoints.Save(data));
    LOG(INFO) << "trainer: step " << step << ": saved checkpoint " << path;
    return Status::OK();
  };
  SavePolicy policy{o.save_checkpoints_steps, o.save_checkpoints_secs};
  SaveTrigger trigger(policy, store->global_step(), Clock::now());

  TrainResult result;
  std::mt19937_64 rng(tc.seed * 7919 + store->global_step());
  const auto start = Clock::now();
  ProgressWindow window;
  const ProgressSchedule schedule{o.log_every_n_steps, o.log_every_n_secs};
  int64_t last_saved = store->global_step();
  bool evaluated_at_end = false;
  while (store->global_step() < max_steps && !StopRequested()) {
    Result<Batch> batch = pipeline->Next();
    if (!batch.ok()) return batch.status().WithContext("trainer: training input");
    const int64_t step = store->global_step();
    if (step == 0 && train_log) train_log->AddImages("input", 0, batch->images, 3);
    const float loss = model->Forward(batch->images, batch->labels, true, &rng);
    // On the GPU each layer's gradients start for the host as soon as backward has them.
    model->Backward([&](int layer) { model->DownloadLayerGradientsAsync(layer); });
    model->DownloadGradients();  // on the GPU: gradients and batch-norm statistics to the host
    PrepareGradients(tc, model.get());
    std::vector<std::pair<std::string, Tensor>> grads;
    for (Variable* v : model->trainable_variables()) grads.emplace_back(v->name, v->grad);
    if (!std::isfinite(loss)) {
      return Internal("trainer: step " + std::to_string(step) + ": the loss is " +
                      std::to_string(loss) + "; training diverged (lower the learning rate)");
    }
    Status applied = store->ApplyGradients(grads);
    if (!applied.ok()) return applied.WithContext("trainer: step " + std::to_string(step));
    model->UploadVariables();  // on the GPU: the updated values back to the device
    const int64_t now_step = store->global_step();
    window.Add(loss, batch->images.dim(0));

    if (schedule.Due(now_step, window.Elapsed()) || now_step == max_steps) {
      const ProgressWindow::Report r = window.Take();
      const float lr = store->learning_rate();
      ProgressLine line;
      line.step = now_step;
      line.max_steps = max_steps;
      line.epoch = static_cast<double>(now_step) / steps_per_epoch;
      line.loss = r.mean_loss;
      line.learning_rate = lr;
      line.examples_per_sec = r.examples_per_sec;
      LOG(INFO) << "trainer: " << FormatProgressLine(line);
      if (train_log) WriteProgressScalars(train_log.get(), now_step, lr, r);
      ReportDeviceMemory(*device, "trainer", now_step, train_log.get());
    }
    if (train_log && o.histogram_every_n_steps > 0 &&
        (now_step % o.histogram_every_n_steps == 0 || now_step == 1)) {
      for (Variable* v : model->variables()) {
        train_log->AddHistogram(v->name, now_step, v->value);
        if (v->trainable) train_log->AddHistogram(v->name + "/gradient", now_step, v->grad);
      }
    }
    const bool epoch_end = now_step % steps_per_epoch == 0;
    const bool eval_now =
        o.eval_every_n_steps > 0 ? now_step % o.eval_every_n_steps == 0 : epoch_end;
    if (eval_now || now_step == max_steps) {
      const auto eval_start = Clock::now();
      ASSIGN_OR_RETURN(Evaluation e, Evaluate(model.get(), input, tc.seed));
      result.test_accuracy = e.accuracy;
      result.test_loss = e.loss;
      result.test_auc = e.auc;  // two-class models only
      evaluated_at_end = now_step == max_steps;
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      LOG(INFO) << "trainer: step " << now_step << ": test accuracy " << std::fixed
                << std::setprecision(4) << e.accuracy << ", test loss " << e.loss << " ("
                << e.examples << " examples, " << std::setprecision(1) << elapsed
                << " s since start)";
      if (eval_log) {
        eval_log->AddScalar("accuracy", now_step, static_cast<float>(e.accuracy));
        eval_log->AddScalar("loss", now_step, static_cast<float>(e.loss));
      }
      window.Exclude(Clock::now() - eval_start);
      if (o.stop_at_accuracy > 0 && e.accuracy >= o.stop_at_accuracy) {
        LOG(INFO) << "trainer: reached test accuracy " << e.accuracy << " >= " << o.stop_at_accuracy
                  << "; stopping";
        break;
      }
    }
    if (trigger.ShouldSave(now_step, Clock::now())) {
      RETURN_IF_ERROR(save(now_step));
      last_saved = now_step;
    }
  }
  result.global_step = store->global_step();
  result.train_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (StopRequested()) LOG(INFO) << "trainer: stop requested at step " << result.global_step;
  // Never saved, exported or "done" over a broken model: the last checkpoint stays the valid one.
  RETURN_IF_ERROR(CheckModelFinite(model->variables(), result.global_step).WithContext("trainer"));
  if (result.global_step != last_saved) RETURN_IF_ERROR(save(result.global_step));
  ReportDeviceMemory(*device, "trainer: at the end", result.global_step, train_log.get());
  if (!evaluated_at_end && !StopRequested()) {
    ASSIGN_OR_RETURN(Evaluation e, Evaluate(model.get(), input, tc.seed));
    result.test_accuracy = e.accuracy;
    result.test_loss = e.loss;
    result.test_auc = e.auc;
  }
  CheckpointData final_state;
  final_state.global_step = result.global_step;
  for (Variable* v : model->variables()) final_state.tensors[v->name] = v->value;
  const std::string exported = o.train_dir + "/model.safetensors";
  RETURN_IF_ERROR(ExportSafetensors(final_state, exported));
  LOG(INFO) << "trainer: exported the variables to " << exported
            << " (loads with safetensors in numpy or PyTorch)";
  if (train_log) RETURN_IF_ERROR(train_log->Close());
  if (eval_log) RETURN_IF_ERROR(eval_log->Close());
  return result;
}

}  // namespace worker
}  // namespace pstrain
