#include "worker/distributed/worker_role.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>

#include "common/checkpoint/safetensors.h"
#include "common/checkpoint/save_trigger.h"
#include "common/summary/summary_writer.h"
#include "ps/learning_rate.h"
#include "worker/distributed/data_lease_client.h"
#include "worker/distributed/intra_node.h"
#include "worker/distributed/leave_signal.h"
#include "worker/distributed/ps_client.h"
#include "worker/distributed/role_input.h"
#include "worker/distributed/role_setup.h"
#include "worker/distributed/training_step.h"
#include "worker/distributed/worker_metrics.h"
#include "worker/training/device_memory_report.h"
#include "worker/training/model_graph.h"
#include "worker/training/model_health.h"
#include "worker/training/progress_line.h"
#include "worker/training/progress_window.h"
#include "worker/training/tf_layout.h"
#include "worker/training/warm_start.h"

namespace pstrain {
namespace worker {
namespace {

using Clock = std::chrono::steady_clock;

// A host group's ranks pull whole steps (the leader broadcasts them); a worker alone as flagged.
PullSchedule PullsOf(const RoleOptions& o, bool alone) {
  return alone ? o.pull_schedule : PullSchedule::kStep;
}

// Why this worker pushes whole steps after backward, or "" when it pushes parts while backward
// goes on (--overlap_push, in parts of --push_part_mb).
std::string WhyWholeSteps(const RoleOptions& o, const RoleSetup& s, bool alone, Device device) {
  if (o.overlap_push == "false") return "--overlap_push=false";
  if (s.clicks) return "a click model's rows go to their servers after the step";
  std::string whole = WhyPushWholeSteps(s.train, o.async, alone, device);
  if (whole.empty() && o.overlap_push == "auto" && PullsOf(o, alone) == PullSchedule::kStep &&
      AllOnLoopback(o.ps_hosts)) {
    whole =
        "every server is on loopback, where there is no link to overlap with; "
        "--overlap_push=true to overlap all the same";
  }
  return whole;
}

// The workers of this host, averaged before one of them pushes (--intra_node_sync); null for a
// worker alone.
Result<std::unique_ptr<IntraNodeGroup>> JoinHostGroup(const RoleOptions& o, const RoleSetup& s,
                                                      IntraNodeSync sync, Model& model,
                                                      Device device, const std::string& who) {
  IntraNodeOptions intra;
  intra.mode = sync;
  intra.worker_hosts = o.worker_hosts;
  intra.task_index = o.task_index;
  intra.device = device;
  intra.curve = o.curve;
  intra.insecure = o.insecure;
  // A non-leader waits while its leader exchanges with the servers, which may itself wait for a
  // server to come back and, in sync mode, for the slowest other host doing the same.
  intra.timeout = std::chrono::seconds(2 * o.unavailable_timeout_secs + 120);
  int64_t averaged_floats = 0;
  for (Variable* v : model.variables()) averaged_floats += v->value.size();
  // The buckets too: ranks that cut them differently would fail at the first average.
  const std::string whole = WhyWholeSteps(o, s, /*alone=*/false, device);
  intra.model = model.name() + ", " + std::to_string(model.variables().size()) + " variables, " +
                std::to_string(averaged_floats) + " floats, " +
                (whole.empty() ? "averaged in buckets of " + std::to_string(o.push_part_bytes) +
                                     " B while backward goes on (--overlap_push, --push_part_mb)"
                               : "averaged after backward (--overlap_push)");
  return JoinIntraNodeGroup(intra, who);
}

// The chief brings every server to one state (restored, kept, or its own values); the others
// wait until it has.
Status InitializeOrWait(const RoleOptions& o, Model& model, PsClient* client,
                        const std::string& who) {
  if (o.task_index != 0) {
    return client->WaitUntilInitialized(std::chrono::seconds(o.init_timeout_secs));
  }
  ASSIGN_OR_RETURN(PsClient::Initialized init, client->Initialize(0, o.train_dir));
  LOG(INFO) << who << " (chief): " << model.Summary() << "variables on " << o.ps_hosts.size()
            << " parameter servers"
            << (init.restored ? " (restored from the committed checkpoint of step " +
                                    std::to_string(*init.restored) + ")"
                : init.kept ? " (" + std::to_string(init.kept) +
                                  " kept the values they had, set before this chief started)"
                            : "");
  if (!o.checkpoint_path.empty() && (init.restored || init.kept)) {
    LOG(WARNING) << who << " (chief): the run resumes, so --checkpoint_path=" << o.checkpoint_path
                 << " (a warm start) was not used: a run's own checkpoints come first, as "
                 << "TensorFlow's warm_start_from";
  }
  return Status::OK();
}

// The push overlaps backward where it may; said once either way. On loopback the transfer is
// copies by the same cores that run backward: nothing to hide it behind (a 300-step local RefNet
// job: 27.3 against 26.6 CPU-s with it, wall time within noise), unless the pulls go by layer,
// which need it. A host's workers (`group`) pull whole parts through their leader, which
// broadcasts them: per-layer pulls are a worker's alone on its host.
Status ChoosePushParts(const RoleOptions& o, const RoleSetup& s, const HostGroup* group,
                       Device device, const Model& model, PsClient* client,
                       const std::string& who) {
  const bool alone = group == nullptr;
  const PullSchedule pulls = PullsOf(o, alone);
  const bool by_layer = pulls != PullSchedule::kStep;
  const std::string whole = WhyWholeSteps(o, s, alone, device);
  if (whole.empty()) client->set_push_part_bytes(o.push_part_bytes);
  const std::string schedule = "--pull_schedule=" + PullScheduleName(pulls);
  if (client->push_part_bytes() == 0) {
    LOG(INFO) << who << ": one push per server a step, after backward ("
              << (whole.empty() ? "see the warning above" : whole) << ")"
              << (by_layer ? "; the pull follows it (" + schedule + " needs the overlapped push)"
                           : "");
    return Status::OK();
  }
  std::vector<LayerVariables> layers;
  for (const auto& layer : model.layers()) {
    layers.push_back({layer->name(), {}});
    for (const Variable& v : layer->variables()) layers.back().variables.push_back(v.name);
  }
  RETURN_IF_ERROR(client->set_pull_schedule(pulls, layers));
  const std::string leader = alone ? "" : "worker " + std::to_string(group->leader());
  const std::string how =
      !alone ? "averaged within the host in buckets of that size while backward goes on; the "
               "leader (" + leader + ") pushes each as it is done, pulled back as applied and "
               "broadcast with the step's values (per-layer pulls are for a worker alone on its "
               "host)"
      : by_layer ? "nearest the input first; the next step pulls by layer (" + schedule + ")"
                 : "pulled back as they are applied";
  LOG(INFO) << who << ": the push overlaps backward, in parts of " << (o.push_part_bytes >> 20)
            << " MiB a server, " << how;
  return Status::OK();
}

// The chief's TensorBoard run: the config as text and the model's graph (as
// tf.summary.FileWriter(logdir, sess.graph); a diagnostic, never fatal).
Result<std::unique_ptr<SummaryWriter>> OpenChiefLog(const RoleOptions& o, const RoleSetup& s,
                                                    int num_workers, int64_t step,
                                                    const std::string& who) {
  ASSIGN_OR_RETURN(std::unique_ptr<SummaryWriter> log, SummaryWriter::Open(o.logdir, "train"));
  log->AddText("config", step,
               "```\n" + s.config.ToYaml() +
                   "\n```\n\ncluster: " + std::to_string(o.ps_hosts.size()) + " ps, " +
                   std::to_string(num_workers) + " workers");
  auto model_node = s.config.Child("model");
  auto graph =
      model_node.ok()
          ? ModelGraphDef(*model_node, {static_cast<int>(o.ps_hosts.size()), o.partition_bytes,
                                        "/job:worker/task:" + std::to_string(o.task_index)})
          : Result<tensorflow::GraphDef>(model_node.status());
  if (graph.ok()) {
    log->AddGraph(*graph);
  } else {
    LOG(WARNING) << who << ": no graph for TensorBoard: " << graph.status().ToString();
  }
  return log;
}

// A click model's AUC and log loss for the "done" line ("" for an image model).
std::string ClickFigures(const Evaluation& e) {
  if (e.auc < 0) return "";
  char text[96];
  std::snprintf(text, sizeof(text), ", test AUC %.4f, test log loss %.4f", e.auc, e.log_loss);
  return text;
}

// The chief, once every worker and evaluator reached the final barrier: the model checked
// finite, saved, evaluated, exported; the servers told to exit; "done".
Status FinishAsChief(const RoleOptions& o, Model* model, RoleInput* input, ComputeDevice* device,
                     PsClient* client, std::unique_ptr<SummaryWriter> log, bool synthetic,
                     const std::string& who) {
  ASSIGN_OR_RETURN(int64_t step, client->Pull());
  // Never "done" over a broken model: the servers' last committed checkpoint stays the valid one.
  RETURN_IF_ERROR(CheckModelFinite(model->variables(), step).WithContext(who));
  model->UploadVariables();
  ReportDeviceMemory(*device, who + ": at the end", step, log.get());
  RETURN_IF_ERROR(client->Checkpoint(step, o.train_dir));
  if (synthetic) {  // nothing was learnt, and the data need not fit the model
    RETURN_IF_ERROR(client->Shutdown());
    if (log) RETURN_IF_ERROR(log->Close());
    std::printf("done: global step %ld (synthetic compute: no evaluation)\n",
                static_cast<long>(step));
    std::fflush(stdout);
    return Status::OK();
  }
  // Every worker and evaluator has passed the barrier: on the CPU, the host's cores are free.
  if (const int threads = device->WidenToEveryCore(); threads > 0) {
    LOG(INFO) << who << ": the other roles are done: the final evaluation runs on " << threads
              << " OpenMP threads, every core this process may use";
  }
  const auto evaluating = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(Evaluation e, input->Evaluate(model, step));
  LOG(INFO) << who << ": evaluated the model of step " << step << " on the test set in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - evaluating).count()
            << " s";
  // The servers' variables; a click model's tables stay whole in the servers' checkpoints.
  CheckpointData exported;
  exported.global_step = step;
  for (Variable* v : ServerVariables(model, *input)) exported.tensors[v->name] = v->value;
  RETURN_IF_ERROR(ExportSafetensors(exported, o.train_dir + "/model.safetensors"));
  RETURN_IF_ERROR(client->Shutdown());
  if (log) RETURN_IF_ERROR(log->Close());
  std::printf("done: global step %ld, test accuracy %.4f, test loss %.4f%s\n",
              static_cast<long>(step), e.accuracy, e.loss, ClickFigures(e).c_str());
  std::fflush(stdout);
  return Status::OK();
}

// A worker's run, its stages in the order RunWorker takes them:
//   1. Prepare: the config, the device, the host group, the chief's warm start (all before
//      connecting: a wrong flag, a missing GPU or a bad checkpoint stops the worker at once)
//   2. Connect: to the servers, initialised by the chief or waited for; how the push leaves
//   3. Begin: the first pull, the input (leased with --elastic_data), the summaries
//   4. Train: the loop, one TrainingStep a batch, with progress lines and checkpoints
//   5. End: leave on SIGTERM, or the final barrier and the chief's finish
class WorkerRun {
 public:
  explicit WorkerRun(const RoleOptions& o)
      : o_(o),
        chief_(o.task_index == 0),
        who_("worker " + std::to_string(o.task_index)),
        // With --min_workers a worker may be one beyond --worker_hosts (launcher add-worker).
        num_workers_(std::max(static_cast<int>(o.worker_hosts.size()),
                              o.min_workers > 0 ? o.task_index + 1 : 0)),
        progress_{o.log_every_n_steps, o.log_every_n_secs} {}

  Status Prepare();
  Status Connect();
  Status Begin();
  Status Train();
  Status End();

 private:
  // Train's parts: one batch's step; the progress line and its summaries; the histograms.
  Status Step(int64_t examples, WorkerMetrics::Clock::duration input_wait);
  void ReportProgress();
  void WriteHistograms();

  const RoleOptions& o_;
  const bool chief_;
  const std::string who_;
  const int num_workers_;
  // 1
  std::optional<RoleSetup> s_;
  Model* model_ = nullptr;
  std::unique_ptr<RoleInput> input_;  // training data, read from step 3 on
  std::unique_ptr<ComputeDevice> device_;
  bool synthetic_ = false;
  std::unique_ptr<IntraNodeGroup> group_;
  std::optional<ps::LearningRateSchedule> schedule_;
  // 2
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<TrainingStep> training_step_;
  // 3
  int64_t step_ = 0;
  std::string mode_;  // said on every progress line: its loss and examples/s are not a model's
  std::unique_ptr<DataLeaseClient> leases_;  // outlives the input, which leases through it
  std::unique_ptr<SummaryWriter> log_;       // the chief's train/ run
  std::unique_ptr<SummaryWriter> own_log_;  // every worker's, beside train/ and the servers' ps-<k>
  std::optional<SaveTrigger> trigger_;
  // 4
  std::mt19937_64 rng_;
  ProgressWindow window_;
  ProgressSchedule progress_;  // when a progress line is due: every N local steps or seconds
  WorkerMetrics metrics_;
  int64_t staleness_ = 0;  // summed over the progress window
  int64_t dropped_ = 0, local_steps_ = 0;
};

Status WorkerRun::Prepare() {
  if (!chief_) LeaveOnSigterm();  // the chief cannot leave: it commits and shuts down
  ASSIGN_OR_RETURN(RoleSetup setup, LoadRoleSetup(o_));
  s_.emplace(std::move(setup));
  model_ = s_->model.get();
  DeviceOptions device = o_.device;
  if (s_->clicks) device.device = "cpu";  // its named inputs and tables are CPU code
  ASSIGN_OR_RETURN(device_, ComputeDevice::Open(device, who_));
  ASSIGN_OR_RETURN(input_, OpenRoleInput(*s_, o_, o_.task_index, num_workers_,
                                         [this](std::vector<std::pair<int, wire::Message>> r) {
                                           return client_->ExchangeWithShards(std::move(r));
                                         }));
  synthetic_ = o_.synthetic_step_ms > 0;
  if (synthetic_ && device_->device() != Device::kCpu) {
    return InvalidArgument(who_ +
                           ": --synthetic_step_ms stands in for a GPU's compute and fills "
                           "host gradients: run it with --device=cpu");
  }
  ASSIGN_OR_RETURN(IntraNodeSync sync, ParseIntraNodeSync(o_.intra_node_sync));
  ASSIGN_OR_RETURN(group_, JoinHostGroup(o_, *s_, sync, *model_, device_->device(), who_));
  if (o_.elastic_data && sync != IntraNodeSync::kOff) {
    return InvalidArgument(
        "--elastic_data needs --intra_node_sync=off: a host group's ranks "
        "would each lease, and one pushes");
  }
  ASSIGN_OR_RETURN(ConfigNode train_node, s_->config.Child("train"));
  ASSIGN_OR_RETURN(ConfigNode lr_node, train_node.Child("learning_rate"));
  ASSIGN_OR_RETURN(ps::LearningRateSchedule schedule,
                   ps::LearningRateSchedule::FromConfig(lr_node));
  schedule_.emplace(std::move(schedule));
  if (chief_ && !o_.checkpoint_path.empty()) {
    ASSIGN_OR_RETURN(ConfigNode model_node, s_->config.Child("model"));
    ASSIGN_OR_RETURN(TfLayout tf_layout, TfLayoutOf(model_node));
    ASSIGN_OR_RETURN(
        RestoreReport warm,
        WarmStart(o_.checkpoint_path, SplitList(o_.restore_exclude), model_, tf_layout));
    LOG(INFO) << who_ << " (chief): " << DescribeWarmStart(o_.checkpoint_path, warm);
  }
  return Status::OK();
}

Status WorkerRun::Connect() {
  ASSIGN_OR_RETURN(client_, PsClient::Connect(o_.ps_hosts, chief_ ? "chief" : "worker",
                                              o_.task_index, ServerVariables(model_, *input_),
                                              o_.partition_bytes, o_.curve, o_.replicas));
  client_->set_unavailable_timeout(std::chrono::seconds(o_.unavailable_timeout_secs));
  client_->set_push_dtype(o_.push_dtype);
  if (o_.push_dtype == wire::TensorDType::kBfloat16) {
    LOG(INFO) << who_ << ": --push_dtype=bf16: gradients go out in bfloat16 (the rounding "
              << "carried into the next push) and the step's pulls come back in it; the servers "
              << "keep float32 weights and slots";
  }
  RETURN_IF_ERROR(InitializeOrWait(o_, *model_, client_.get(), who_));
  RETURN_IF_ERROR(ChoosePushParts(o_, *s_, group_ ? &group_->group : nullptr, device_->device(),
                                  *model_, client_.get(), who_));
  training_step_ =
      std::make_unique<TrainingStep>(model_, s_->train, client_.get(), group_.get(), who_,
                                     std::chrono::milliseconds(o_.synthetic_step_ms));
  training_step_->set_before_push([this](int64_t step) { return input_->PushRows(step); });
  return Status::OK();
}

Status WorkerRun::Begin() {
  mode_ = synthetic_ ? "synthetic compute (" + std::to_string(o_.synthetic_step_ms) +
                           " ms a step, no forward/backward): "
                     : "";
  ASSIGN_OR_RETURN(step_, training_step_->PullAndPlace(*device_));
  if (o_.elastic_data) {
    ASSIGN_OR_RETURN(leases_, DataLeaseClient::Connect(o_.ps_hosts, chief_ ? "chief" : "worker",
                                                       o_.task_index, o_.curve));
    s_->input.lease = leases_->AsCallback();
    s_->input.lease_seed = s_->train.seed;
  }
  if (chief_ && !o_.logdir.empty()) {
    ASSIGN_OR_RETURN(log_, OpenChiefLog(o_, *s_, num_workers_, step_, who_));
  }
  RETURN_IF_ERROR(input_->Start(step_, client_.get(), log_.get()));
  trigger_.emplace(SavePolicy{o_.save_checkpoints_steps, o_.save_checkpoints_secs}, step_,
                   Clock::now());
  LOG(INFO) << who_ << ": " << mode_ << "training " << model_->name() << " from global step "
            << step_ << " to " << s_->max_steps << " on shard " << o_.task_index << " of "
            << num_workers_;
  rng_.seed(s_->train.seed * 7919 + o_.task_index);
  window_ = ProgressWindow();  // the first window's rates count from here, as the metrics'
  if (!o_.logdir.empty()) {
    ASSIGN_OR_RETURN(own_log_,
                     SummaryWriter::Open(o_.logdir, "worker-" + std::to_string(o_.task_index)));
  }
  metrics_ = WorkerMetrics();
  return Status::OK();
}

Status WorkerRun::Train() {
  while ((s_->until_data_ends || step_ < s_->max_steps) && !LeaveRequested()) {
    const auto waited = WorkerMetrics::Clock::now();
    Result<int64_t> examples = input_->Next(step_);
    const auto input_wait = WorkerMetrics::Clock::now() - waited;
    if (o_.elastic_data && examples.status().code() == StatusCode::kOutOfRange) {
      LOG(INFO) << who_ << ": the data ledger's epochs are used: " << examples.status().message();
      break;
    }
    if (!examples.ok()) {
      return examples.status().WithContext(who_ + ": step " + std::to_string(step_) +
                                           ": training input");
    }
    RETURN_IF_ERROR(Step(*examples, input_wait));
    if (progress_.Due(local_steps_, window_.Elapsed()) || step_ >= s_->max_steps) ReportProgress();
    if (log_ && o_.histogram_every_n_steps > 0 && local_steps_ % o_.histogram_every_n_steps == 0) {
      WriteHistograms();
    }
    if (chief_ && trigger_->ShouldSave(step_, Clock::now())) {
      RETURN_IF_ERROR(client_->Checkpoint(step_, o_.train_dir));
      LOG(INFO) << who_ << ": step " << step_ << ": servers saved a checkpoint in " << o_.train_dir;
    }
  }
  return Status::OK();
}

Status WorkerRun::Step(int64_t examples, WorkerMetrics::Clock::duration input_wait) {
  ASSIGN_OR_RETURN(StepOutcome outcome, training_step_->Run(
                                            [&](const std::function<void(int)>& before_layer) {
                                              return input_->Forward(model_, &rng_, before_layer);
                                            },
                                            step_));
  const int64_t stale = std::max<int64_t>(0, outcome.exchange.global_step - step_ - 1);
  staleness_ += stale;
  metrics_.AddStep(input_wait, outcome.compute, outcome.exchange_wait, examples, stale);
  dropped_ += outcome.exchange.dropped;
  step_ = outcome.exchange.global_step;
  ++local_steps_;
  window_.Add(outcome.loss, examples);
  return Status::OK();
}

void WorkerRun::ReportProgress() {
  const ProgressWindow::Report r = window_.Take();
  const double mean_staleness = static_cast<double>(staleness_) / r.steps;
  ProgressLine line;
  line.step = step_;
  line.max_steps = s_->max_steps;
  line.epoch = static_cast<double>(step_) / s_->steps_per_epoch;
  line.loss = r.mean_loss;
  line.learning_rate = schedule_->At(step_);
  line.examples_per_sec = r.examples_per_sec;
  line.staleness = mean_staleness;
  line.dropped = dropped_;
  LOG(INFO) << who_ << ": " << mode_ << FormatProgressLine(line);
  if (log_) {
    WriteProgressScalars(log_.get(), step_, schedule_->At(step_), r);
    log_->AddScalar("staleness", step_, static_cast<float>(mean_staleness));
    log_->AddScalar("dropped_gradients", step_, static_cast<float>(dropped_));
  }
  ReportDeviceMemory(*device_, who_, step_, log_.get());
  metrics_.Write(own_log_.get(), step_);
  staleness_ = 0;
}

void WorkerRun::WriteHistograms() {
  for (Variable* v : model_->variables()) {
    log_->AddHistogram(v->name, step_, v->value);
    if (v->trainable) log_->AddHistogram(v->name + "/gradient", step_, v->grad);
  }
}

Status WorkerRun::End() {
  if (LeaveRequested()) {  // ~PsClient's heartbeat monitor says goodbye to every server
    LOG(INFO) << who_ << ": SIGTERM: leaving the job at global step " << step_ << " after "
              << local_steps_ << " local steps";
    MarkLeftOnSigterm();
    return Status::OK();
  }
  LOG(INFO) << who_ << ": reached step " << step_ << " after " << local_steps_
            << " local steps; waiting for the others";
  RETURN_IF_ERROR(client_->Barrier("done", num_workers_ + o_.evaluators));
  if (!chief_) return Status::OK();
  return FinishAsChief(o_, model_, input_.get(), device_.get(), client_.get(), std::move(log_),
                       synthetic_, who_);
}

}  // namespace

Status RunWorker(const RoleOptions& o) {
  WorkerRun run(o);
  RETURN_IF_ERROR(run.Prepare());
  RETURN_IF_ERROR(run.Connect());
  RETURN_IF_ERROR(run.Begin());
  RETURN_IF_ERROR(run.Train());
  return run.End();
}

}  // namespace worker
}  // namespace pstrain
