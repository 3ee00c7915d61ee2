#include "worker/training/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/joined_checkpoint.h"
#include "common/checkpoint/partial_restore.h"
#include "common/checkpoint/safetensors.h"
#include "common/checkpoint/save_trigger.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/signal_watch.h"
#include "common/summary/summary_writer.h"
#include "ps/variable_store.h"
#include "worker/network/model.h"
#include "worker/training/click_input.h"
#include "worker/training/device_memory_report.h"
#include "worker/training/evaluation_scalars.h"
#include "worker/training/gradient_preparation.h"
#include "worker/training/image_input.h"
#include "worker/training/model_graph.h"
#include "worker/training/model_health.h"
#include "worker/training/progress_line.h"
#include "worker/training/progress_window.h"
#include "worker/training/tf_layout.h"
#include "worker/training/train_config.h"
#include "worker/training/update_placement.h"
#include "worker/training/warm_start.h"

namespace pstrain {
namespace worker {
namespace {

using Clock = std::chrono::steady_clock;

// SIGINT or SIGTERM, watched by the program's main (tools/train_main.cc) before any thread.
bool StopRequested() { return SignalReceived(SIGINT) || SignalReceived(SIGTERM); }

// Everything one run holds.
struct Run {
  Run(ConfigNode config, ConfigNode model_node)
      : config(std::move(config)), model_node(std::move(model_node)) {}
  ConfigNode config, model_node;
  TrainConfig train;
  std::unique_ptr<ComputeDevice> device;
  std::unique_ptr<Model> model;
  std::unique_ptr<ps::VariableStore> store;
  std::unique_ptr<DeviceUpdate> device_update;  // null: the store updates on the host
  std::unique_ptr<TrainingInput> input;
  std::map<std::string, Tensor> state;  // what a checkpoint holds
  std::unique_ptr<CheckpointManager> checkpoints;
  std::unique_ptr<SummaryWriter> train_log, eval_log;
  int64_t steps_per_epoch = 1;
  int64_t max_steps = 0;
  std::mt19937_64 rng;  // dropout's masks
};

// Restores the checkpoint --checkpoint_path names, else the train_dir's latest, into run->state,
// the input (a click model's tables) and the global step; nothing when there is none.
Status Restore(const TrainerOptions& o, Run* run) {
  Result<CheckpointData> restored = FailedPrecondition("nothing to restore");
  if (!o.checkpoint_path.empty()) {
    restored = run->checkpoints->Restore(o.checkpoint_path);
    if (!restored.ok()) return restored.status();
  } else if (run->checkpoints->LatestPath().ok()) {
    restored = run->checkpoints->RestoreLatest();
    if (!restored.ok()) return restored.status();
  }
  if (!restored.ok()) return Status::OK();
  // A parameter server's checkpoint holds a variable split across servers as its parts.
  RETURN_IF_ERROR(JoinSplitVariables(&restored.value())
                      .WithContext(o.checkpoint_path.empty() ? o.train_dir : o.checkpoint_path));
  RestoreFilter filter;
  filter.exclude = SplitList(o.restore_exclude);
  ASSIGN_OR_RETURN(RestoreReport report, RestoreInto(restored.value(), filter, &run->state));
  // A click model's tables, checked whole before any row changes. An image model's input is
  // made after the restore (its shuffle starts from the step) and holds no state.
  if (run->input)
    RETURN_IF_ERROR(run->input->RestoreFrom(restored->tensors, restored->global_step));
  run->store->set_global_step(restored->global_step);
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
  return Status::OK();
}

// TensorBoard's train/ and eval/ runs, the config as text and the model's graph.
Status OpenLogs(const TrainerOptions& o, Run* run) {
  if (o.logdir.empty()) return Status::OK();
  ASSIGN_OR_RETURN(run->train_log, SummaryWriter::Open(o.logdir, "train"));
  ASSIGN_OR_RETURN(run->eval_log, SummaryWriter::Open(o.logdir, "eval"));
  run->train_log->AddText(
      "config", run->store->global_step(),
      "```\n" + run->config.ToYaml() + "\n```\n\ncommand line: `" + o.command_line + "`");
  // The Graphs tab; a diagnostic, never fatal. One process and no servers: every variable sits
  // beside its layers, on the device as TensorFlow names a local one.
  ModelGraphOptions local;
  local.num_ps = 0;
  local.worker_device = std::string("/job:localhost/replica:0/task:0/device:") +
                        DeviceName(run->device->device()) + ":0";
  auto graph = ModelGraphDef(run->model_node, local);
  if (graph.ok()) {
    run->train_log->AddGraph(*graph);
  } else {
    LOG(WARNING) << "trainer: no graph for TensorBoard: " << graph.status().ToString();
  }
  return Status::OK();
}

// The model, its dense store and its input, restored from a checkpoint when there is one.
Result<Run> Prepare(const TrainerOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  const bool clicks = config.Has("tables");
  RETURN_IF_ERROR(clicks ? config.CheckKeys({"model", "train", "input", "tables"})
                         : config.CheckKeys({"model", "train", "input"}));
  // First: a wrong device flag or a missing GPU stops the run before data is loaded. A click
  // model's named inputs and tables are CPU code: --device=auto means the CPU for it.
  DeviceOptions device_options = o.device;
  if (clicks && device_options.device == "gpu") {
    return InvalidArgument(
        "--device=gpu: a model with sparse tables (the config's 'tables') trains on the CPU "
        "only; run it with --device=cpu or auto");
  }
  if (clicks) device_options.device = "cpu";
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeDevice> device,
                   ComputeDevice::Open(device_options, "trainer"));
  ASSIGN_OR_RETURN(ConfigNode model_node, config.Child("model"));
  Run run(std::move(config), std::move(model_node));
  run.device = std::move(device);
  ASSIGN_OR_RETURN(run.model, Model::FromConfig(run.model_node));
  ASSIGN_OR_RETURN(ConfigNode train_node, run.config.Child("train"));
  ASSIGN_OR_RETURN(run.train, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(run.store, ps::VariableStore::FromConfig(train_node));
  LOG(INFO) << "trainer: " << run.model->Summary();
  run.model->InitVariables(run.train.seed);
  std::optional<InputOptions> images;  // read before anything is written, opened after
  if (clicks) {
    ASSIGN_OR_RETURN(run.input,
                     ClickInput::Create(run.config, run.model.get(), run.train.batch_size,
                                        run.train.seed, o.data_dir, o.max_table_rows));
  } else {
    ASSIGN_OR_RETURN(images, ReadInputOptions(run.config, o.data_dir));
  }
  for (Variable* v : run.model->variables()) {
    if (run.input && run.input->Holds(v)) continue;  // the tables' rows
    if (v->trainable)
      RETURN_IF_ERROR(run.store->AddVariable(v->name, v->value));
    else
      run.state[v->name] = v->value;
  }
  for (auto& [name, t] : run.store->StateTensors()) run.state[name] = t;
  run.checkpoints = std::make_unique<CheckpointManager>(o.train_dir, o.max_to_keep);
  if (!clicks) {
    ASSIGN_OR_RETURN(TfLayout tf_layout, TfLayoutOf(run.model_node));
    run.checkpoints->set_tf_layout(std::move(tf_layout));  // a TensorFlow checkpoint's kernels
  }
  RETURN_IF_ERROR(Restore(o, &run));
  // After the restore: the device mirrors start from the values training resumes from.
  RETURN_IF_ERROR(run.device->Place(run.model.get()));
  ASSIGN_OR_RETURN(run.device_update,
                   PlaceUpdate(run.train, clicks, *run.device, run.store.get(), run.model.get()));
  RETURN_IF_ERROR(OpenLogs(o, &run));
  if (images) {
    ASSIGN_OR_RETURN(run.input, ImageInput::Create(*images, run.train.batch_size, run.train.seed,
                                                   run.store->global_step(), run.train_log.get()));
  }
  run.rng.seed(run.train.seed * 7919 + run.store->global_step());
  run.steps_per_epoch =
      std::max<int64_t>(1, run.input->examples_per_epoch() / run.train.batch_size);
  const int64_t epochs = o.epochs > 0 ? o.epochs : run.train.epochs;
  run.max_steps = o.max_steps > 0           ? o.max_steps
                  : run.train.max_steps > 0 ? run.train.max_steps
                                            : epochs * run.steps_per_epoch;
  return run;
}

// One training step: forward and backward, the dense update, then the input's own (the tables').
Result<TrainingInput::Pass> Step(Run* run) {
  const int64_t step = run->store->global_step();
  const std::string at = "step " + std::to_string(step);
  ASSIGN_OR_RETURN(TrainingInput::Pass pass,
                   run->input->ForwardBackward(run->model.get(), step, &run->rng));
  if (!std::isfinite(pass.loss)) {
    return Internal(at + ": the loss is " + std::to_string(pass.loss) +
                    "; training diverged (lower the learning rate)");
  }
  if (run->device_update) {  // on the GPU: nothing to prepare (update_placement.h), no copies
    RETURN_IF_ERROR(run->device_update->Apply(run->store->learning_rate(), step).WithContext(at));
    run->store->set_global_step(step + 1);
    return pass;
  }
  PrepareGradients(run->train, run->model.get());
  std::vector<std::pair<std::string, Tensor>> grads;
  for (Variable* v : run->model->trainable_variables()) {
    if (!run->input->Holds(v)) grads.emplace_back(v->name, v->grad);
  }
  RETURN_IF_ERROR(run->store->ApplyGradients(grads).WithContext(at));
  RETURN_IF_ERROR(run->input->AfterUpdate(step).WithContext(at));
  run->model->UploadVariables();  // on the GPU: the updated values back to the device
  return pass;
}

void LogProgress(Run* run, int64_t step, ProgressWindow* window) {
  const ProgressWindow::Report r = window->Take();
  const float lr = run->store->learning_rate();
  ProgressLine line;
  line.step = step;
  line.max_steps = run->max_steps;
  line.epoch = static_cast<double>(step) / run->steps_per_epoch;
  line.loss = r.mean_loss;
  line.learning_rate = lr;
  line.examples_per_sec = r.examples_per_sec;
  const std::string more = run->input->Progress();
  LOG(INFO) << "trainer: " << FormatProgressLine(line) << (more.empty() ? "" : ", " + more);
  if (run->train_log) WriteProgressScalars(run->train_log.get(), step, lr, r);
  ReportDeviceMemory(*run->device, "trainer", step, run->train_log.get());
}

// The values, gradients and slots the GPU's update holds, into the host buffers that
// histograms, checkpoints and the export read; nothing when the update runs on the host.
void SyncToHost(Run* run) {
  if (run->device_update) run->device_update->DownloadState();
}

void LogHistograms(Run* run, int64_t step) {
  SyncToHost(run);
  for (Variable* v : run->model->variables()) {
    run->train_log->AddHistogram(v->name, step, v->value);
    if (v->trainable) run->train_log->AddHistogram(v->name + "/gradient", step, v->grad);
  }
}

// The test set's figures at `step`, logged and written to the eval/ run.
Result<Evaluation> EvaluateAndLog(Run* run, int64_t step, Clock::time_point start) {
  ASSIGN_OR_RETURN(Evaluation e, run->input->Evaluate(run->model.get(), step));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::ostringstream clicks;
  if (e.auc >= 0) {
    clicks << std::fixed << std::setprecision(4) << ", test AUC " << e.auc << ", test log loss "
           << e.log_loss;
  }
  LOG(INFO) << "trainer: step " << step << ": test accuracy " << std::fixed << std::setprecision(4)
            << e.accuracy << ", test loss " << e.loss << clicks.str() << " (" << e.examples
            << " examples, " << std::setprecision(1) << elapsed << " s since start)";
  if (run->eval_log) AddEvaluationScalars(e, step, run->eval_log.get());
  return e;
}

void Record(const Evaluation& e, TrainResult* result) {
  result->test_accuracy = e.accuracy;
  result->test_loss = e.loss;
  result->test_auc = e.auc;
  result->test_log_loss = e.log_loss;
}

Status Save(Run* run, int64_t step) {
  SyncToHost(run);
  CheckpointData data;
  data.global_step = step;
  data.tensors = run->state;
  run->input->SaveTo(&data.tensors);
  data.metadata["model"] = run->model->name();
  ASSIGN_OR_RETURN(std::string path, run->checkpoints->Save(data));
  LOG(INFO) << "trainer: step " << step << ": saved checkpoint " << path;
  return Status::OK();
}

// The final values as safetensors; the tables' gathered rows are not the tables and stay out.
Status Export(const TrainerOptions& o, Run* run, int64_t step) {
  CheckpointData final_state;
  final_state.global_step = step;
  for (Variable* v : run->model->variables()) {
    if (!run->input->Holds(v)) final_state.tensors[v->name] = v->value;
  }
  const std::string exported = o.train_dir + "/model.safetensors";
  RETURN_IF_ERROR(ExportSafetensors(final_state, exported));
  LOG(INFO) << "trainer: exported the variables to " << exported
            << " (loads with safetensors in numpy or PyTorch)";
  return run->input->WriteFinal(run->model_node, run->model.get(), o.train_dir);
}

}  // namespace

Result<TrainResult> Train(const TrainerOptions& o) {
  ASSIGN_OR_RETURN(Run run, Prepare(o));
  LOG(INFO) << "trainer: training " << run.model->name() << " from step "
            << run.store->global_step() << " to " << run.max_steps << " (" << run.steps_per_epoch
            << " steps per epoch, batch " << run.train.batch_size << ", "
            << run.store->optimizer().name() << ")";
  if (!o.logdir.empty()) {
    LOG(INFO) << "trainer: TensorBoard logs in " << o.logdir
              << "; watch with: tensorboard --logdir " << o.logdir;
  }
  SaveTrigger trigger(SavePolicy{o.save_checkpoints_steps, o.save_checkpoints_secs},
                      run.store->global_step(), Clock::now());
  TrainResult result;
  const auto start = Clock::now();
  ProgressWindow window;
  const ProgressSchedule schedule{o.log_every_n_steps, o.log_every_n_secs};
  int64_t last_saved = run.store->global_step();
  bool evaluated_at_end = false;
  while (run.store->global_step() < run.max_steps && !StopRequested()) {
    auto pass = Step(&run);
    if (!pass.ok()) return pass.status().WithContext("trainer");
    const int64_t step = run.store->global_step();
    window.Add(pass->loss, pass->examples);
    if (schedule.Due(step, window.Elapsed()) || step == run.max_steps)
      LogProgress(&run, step, &window);
    if (run.train_log && o.histogram_every_n_steps > 0 &&
        (step % o.histogram_every_n_steps == 0 || step == 1))
      LogHistograms(&run, step);
    const bool eval_now = o.eval_every_n_steps > 0 ? step % o.eval_every_n_steps == 0
                                                   : step % run.steps_per_epoch == 0;
    if (eval_now || step == run.max_steps) {
      const auto eval_start = Clock::now();
      ASSIGN_OR_RETURN(Evaluation e, EvaluateAndLog(&run, step, start));
      Record(e, &result);
      evaluated_at_end = step == run.max_steps;
      window.Exclude(Clock::now() - eval_start);
      if (o.stop_at_accuracy > 0 && e.accuracy >= o.stop_at_accuracy) {
        LOG(INFO) << "trainer: reached test accuracy " << e.accuracy << " >= " << o.stop_at_accuracy
                  << "; stopping";
        break;
      }
    }
    if (trigger.ShouldSave(step, Clock::now())) {
      RETURN_IF_ERROR(Save(&run, step));
      last_saved = step;
    }
  }
  result.global_step = run.store->global_step();
  result.train_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (StopRequested()) LOG(INFO) << "trainer: stop requested at step " << result.global_step;
  // Never saved, exported or "done" over a broken model: the last checkpoint stays the valid one.
  SyncToHost(&run);
  RETURN_IF_ERROR(
      CheckModelFinite(run.model->variables(), result.global_step).WithContext("trainer"));
  if (result.global_step != last_saved) RETURN_IF_ERROR(Save(&run, result.global_step));
  ReportDeviceMemory(*run.device, "trainer: at the end", result.global_step, run.train_log.get());
  if (!evaluated_at_end && !StopRequested()) {
    ASSIGN_OR_RETURN(Evaluation e, EvaluateAndLog(&run, result.global_step, start));
    Record(e, &result);
  }
  RETURN_IF_ERROR(Export(o, &run, result.global_step));
  if (run.train_log) RETURN_IF_ERROR(run.train_log->Close());
  if (run.eval_log) RETURN_IF_ERROR(run.eval_log->Close());
  return result;
}

}  // namespace worker
}  // namespace pstrain
