#include "worker/distributed/worker_role.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <thread>

#include "common/checkpoint/safetensors.h"
#include "common/checkpoint/save_trigger.h"
#include "common/summary/summary_writer.h"
#include "ps/learning_rate.h"
#include "worker/distributed/data_lease_client.h"
#include "worker/distributed/intra_node.h"
#include "worker/distributed/leave_signal.h"
#include "worker/distributed/ps_client.h"
#include "worker/distributed/training_step.h"
#include "worker/distributed/worker_metrics.h"
#include "worker/training/device_memory_report.h"
#include "worker/training/evaluation.h"
#include "worker/training/input/input_pipeline.h"
#include "worker/training/model_graph.h"
#include "worker/training/model_health.h"
#include "worker/training/progress_line.h"
#include "worker/training/progress_window.h"
#include "worker/training/train_config.h"
#include "worker/training/warm_start.h"

namespace pstrain {
namespace worker {
namespace {

using Clock = std::chrono::steady_clock;

struct Setup {
  explicit Setup(ConfigNode c) : config(std::move(c)) {}
  ConfigNode config;
  std::unique_ptr<Model> model;
  TrainConfig train;
  InputOptions input;
  int64_t max_steps = 0;
  int64_t steps_per_epoch = 1;
  // --elastic_data without a step limit: training ends when the data ledger's epochs are used
  // (max_steps is then only the progress lines' estimate: partial batches add steps).
  bool until_data_ends = false;
};

Result<Setup> Load(const RoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  Setup s(std::move(config));
  RETURN_IF_ERROR(s.config.CheckKeys({"model", "train", "input"}));
  ASSIGN_OR_RETURN(ConfigNode model_node, s.config.Child("model"));
  ASSIGN_OR_RETURN(s.model, Model::FromConfig(model_node));
  ASSIGN_OR_RETURN(ConfigNode train_node, s.config.Child("train"));
  ASSIGN_OR_RETURN(s.train, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(s.input, ReadInputOptions(s.config, o.data_dir));
  ASSIGN_OR_RETURN(const int64_t examples, ExamplesPerEpoch(s.input));
  // Global steps per epoch do not depend on the number of workers: each push is one step.
  s.steps_per_epoch = std::max<int64_t>(1, examples / s.train.batch_size);
  const int64_t epochs = o.epochs > 0 ? o.epochs : s.train.epochs;
  s.max_steps = o.max_steps > 0
                    ? o.max_steps
                    : (s.train.max_steps > 0 ? s.train.max_steps : epochs * s.steps_per_epoch);
  s.until_data_ends = o.elastic_data && o.max_steps == 0 && s.train.max_steps == 0;
  s.model->InitVariables(s.train.seed);
  return s;
}

}  // namespace

Result<ElasticData> ReadElasticData(const RoleOptions& o) {
  ASSIGN_OR_RETURN(ConfigNode config, ConfigNode::LoadFile(o.config_path));
  ASSIGN_OR_RETURN(ConfigNode train_node, config.Child("train"));
  ASSIGN_OR_RETURN(TrainConfig train, ReadTrainConfig(train_node));
  ASSIGN_OR_RETURN(InputOptions input, ReadInputOptions(config, o.data_dir));
  ElasticData d;
  ASSIGN_OR_RETURN(d.examples, ExamplesPerEpoch(input));
  d.epochs = o.epochs > 0 ? o.epochs : train.epochs;
  d.seed = train.seed;
  return d;
}

namespace {

// The workers of this host, averaged before one of them pushes (--intra_node_sync); null for a
// worker alone.
Result<std::unique_ptr<IntraNodeGroup>> JoinHostGroup(const RoleOptions& o, IntraNodeSync sync,
                                                      Model& model, Device device,
                                                      const std::string& who) {
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
  intra.model = model.name() + ", " + std::to_string(model.variables().size()) + " variables, " +
                std::to_string(averaged_floats) + " floats";
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
// job: 27.3 against 26.6 CPU-s with it, wall time within noise).
void ChoosePushParts(const RoleOptions& o, const TrainConfig& train, bool alone, Device device,
                     PsClient* client, const std::string& who) {
  std::string whole = o.overlap_push == "false" ? "--overlap_push=false"
                                                : WhyPushWholeSteps(train, o.async, alone, device);
  if (whole.empty() && o.overlap_push == "auto" && AllOnLoopback(o.ps_hosts)) {
    whole =
        "every server is on loopback, where there is no link to overlap with; "
        "--overlap_push=true to overlap all the same";
  }
  if (whole.empty()) client->set_push_part_bytes(o.push_part_bytes);
  if (client->push_part_bytes() > 0) {
    LOG(INFO) << who << ": the push overlaps backward, in parts of " << (o.push_part_bytes >> 20)
              << " MiB a server, pulled back as they are applied";
  } else {
    LOG(INFO) << who << ": one push per server a step, after backward ("
              << (whole.empty() ? "see the warning above" : whole) << ")";
  }
}

// The chief's TensorBoard run: the config as text and the model's graph (as
// tf.summary.FileWriter(logdir, sess.graph); a diagnostic, never fatal).
Result<std::unique_ptr<SummaryWriter>> OpenChiefLog(const RoleOptions& o, const Setup& s,
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

// The chief, once every worker and evaluator reached the final barrier: the model checked
// finite, saved, evaluated, exported; the servers told to exit; "done".
Status FinishAsChief(const RoleOptions& o, Setup& s, Model* model, ComputeDevice* device,
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
  ASSIGN_OR_RETURN(Evaluation e, Evaluate(model, s.input, s.train.seed));
  CheckpointData exported;
  exported.global_step = step;
  for (Variable* v : model->variables()) exported.tensors[v->name] = v->value;
  RETURN_IF_ERROR(ExportSafetensors(exported, o.train_dir + "/model.safetensors"));
  RETURN_IF_ERROR(client->Shutdown());
  if (log) RETURN_IF_ERROR(log->Close());
  std::printf("done: global step %ld, test accuracy %.4f, test loss %.4f\n",
              static_cast<long>(step), e.accuracy, e.loss);
  std::fflush(stdout);
  return Status::OK();
}

}  // namespace

Status RunWorker(const RoleOptions& o) {
  const bool chief = o.task_index == 0;
  const std::string who = "worker " + std::to_string(o.task_index);
  // With --min_workers a worker may be one beyond --worker_hosts (launcher add-worker).
  const int num_workers =
      std::max(static_cast<int>(o.worker_hosts.size()), o.min_workers > 0 ? o.task_index + 1 : 0);
  if (!chief) LeaveOnSigterm();  // the chief cannot leave: it commits and shuts down
  ASSIGN_OR_RETURN(Setup s, Load(o));
  // Before connecting: a wrong device flag or a missing GPU stops the worker at once.
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeDevice> device, ComputeDevice::Open(o.device, who));
  const bool synthetic = o.synthetic_step_ms > 0;
  if (synthetic && device->device() != Device::kCpu) {
    return InvalidArgument(who +
                           ": --synthetic_step_ms stands in for a GPU's compute and fills "
                           "host gradients: run it with --device=cpu");
  }
  ASSIGN_OR_RETURN(IntraNodeSync sync, ParseIntraNodeSync(o.intra_node_sync));
  ASSIGN_OR_RETURN(std::unique_ptr<IntraNodeGroup> group,
                   JoinHostGroup(o, sync, *s.model, device->device(), who));
  if (o.elastic_data && sync != IntraNodeSync::kOff) {
    return InvalidArgument(
        "--elastic_data needs --intra_node_sync=off: a host group's ranks "
        "would each lease, and one pushes");
  }
  ASSIGN_OR_RETURN(ConfigNode train_node, s.config.Child("train"));
  ASSIGN_OR_RETURN(ConfigNode lr_node, train_node.Child("learning_rate"));
  ASSIGN_OR_RETURN(ps::LearningRateSchedule schedule,
                   ps::LearningRateSchedule::FromConfig(lr_node));
  Model* model = s.model.get();
  if (chief && !o.checkpoint_path.empty()) {  // before connecting: a bad checkpoint stops at once
    ASSIGN_OR_RETURN(RestoreReport warm,
                     WarmStart(o.checkpoint_path, SplitList(o.restore_exclude), model));
    LOG(INFO) << who << " (chief): " << DescribeWarmStart(o.checkpoint_path, warm);
  }
  ASSIGN_OR_RETURN(auto client,
                   PsClient::Connect(o.ps_hosts, chief ? "chief" : "worker", o.task_index,
                                     model->variables(), o.partition_bytes, o.curve, o.replicas));
  client->set_unavailable_timeout(std::chrono::seconds(o.unavailable_timeout_secs));
  RETURN_IF_ERROR(InitializeOrWait(o, *model, client.get(), who));
  ChoosePushParts(o, s.train, group == nullptr, device->device(), client.get(), who);
  TrainingStep training_step(model, s.train, client.get(), group.get(), who,
                             std::chrono::milliseconds(o.synthetic_step_ms));
  // Said on every progress line: its loss and examples/s are not a model's.
  const std::string mode = synthetic ? "synthetic compute (" + std::to_string(o.synthetic_step_ms) +
                                           " ms a step, no forward/backward): "
                                     : "";
  ASSIGN_OR_RETURN(int64_t step, training_step.PullAndPlace(*device));
  std::unique_ptr<DataLeaseClient> leases;  // outlives the pipeline, which leases through it
  if (o.elastic_data) {
    ASSIGN_OR_RETURN(leases, DataLeaseClient::Connect(o.ps_hosts, chief ? "chief" : "worker",
                                                      o.task_index, o.curve));
    s.input.lease = leases->AsCallback();
    s.input.lease_seed = s.train.seed;
  }
  ASSIGN_OR_RETURN(auto pipeline,
                   InputPipeline::Create(s.input, s.train.batch_size, o.task_index, num_workers,
                                         s.train.seed + 1000 * o.task_index + step));
  std::unique_ptr<SummaryWriter> log;
  if (chief && !o.logdir.empty()) {
    ASSIGN_OR_RETURN(log, OpenChiefLog(o, s, num_workers, step, who));
  }
  SaveTrigger trigger(SavePolicy{o.save_checkpoints_steps, o.save_checkpoints_secs}, step,
                      Clock::now());
  LOG(INFO) << who << ": " << mode << "training " << model->name() << " from global step " << step
            << " to " << s.max_steps << " on shard " << o.task_index << " of " << num_workers;

  std::mt19937_64 rng(s.train.seed * 7919 + o.task_index);
  ProgressWindow window;
  // Every worker's own run beside the chief's train/ and the servers' ps-<k>.
  std::unique_ptr<SummaryWriter> own_log;
  if (!o.logdir.empty()) {
    ASSIGN_OR_RETURN(own_log,
                     SummaryWriter::Open(o.logdir, "worker-" + std::to_string(o.task_index)));
  }
  WorkerMetrics metrics;
  int64_t staleness = 0, dropped = 0, local_steps = 0;  // staleness: summed over the window
  while ((s.until_data_ends || step < s.max_steps) && !LeaveRequested()) {
    const auto waited = WorkerMetrics::Clock::now();
    Result<Batch> batch = pipeline->Next();
    const auto input_wait = WorkerMetrics::Clock::now() - waited;
    if (o.elastic_data && batch.status().code() == StatusCode::kOutOfRange) {
      LOG(INFO) << who << ": the data ledger's epochs are used: " << batch.status().message();
      break;
    }
    if (!batch.ok()) return batch.status().WithContext(who + ": training input");
    if (o.elastic_data) client->set_data_uses(batch->uses);
    if (log && local_steps == 0) log->AddImages("input", step, batch->images, 3);
    ASSIGN_OR_RETURN(StepOutcome outcome, training_step.Run(*batch, step, &rng));
    const int64_t stale = std::max<int64_t>(0, outcome.exchange.global_step - step - 1);
    staleness += stale;
    metrics.AddStep(input_wait, outcome.compute, outcome.exchange_wait, batch->images.dim(0),
                    stale);
    dropped += outcome.exchange.dropped;
    step = outcome.exchange.global_step;
    ++local_steps;
    window.Add(outcome.loss, batch->images.dim(0));
    if (local_steps % o.log_every_n_steps == 0 || step >= s.max_steps) {
      const ProgressWindow::Report r = window.Take();
      const double mean_staleness = static_cast<double>(staleness) / r.steps;
      ProgressLine line;
      line.step = step;
      line.max_steps = s.max_steps;
      line.epoch = static_cast<double>(step) / s.steps_per_epoch;
      line.loss = r.mean_loss;
      line.learning_rate = schedule.At(step);
      line.examples_per_sec = r.examples_per_sec;
      line.staleness = mean_staleness;
      line.dropped = dropped;
      LOG(INFO) << who << ": " << mode << FormatProgressLine(line);
      if (log) {
        WriteProgressScalars(log.get(), step, schedule.At(step), r);
        log->AddScalar("staleness", step, static_cast<float>(mean_staleness));
        log->AddScalar("dropped_gradients", step, static_cast<float>(dropped));
      }
      ReportDeviceMemory(*device, who, step, log.get());
      metrics.Write(own_log.get(), step);
      staleness = 0;
    }
    if (log && o.histogram_every_n_steps > 0 && local_steps % o.histogram_every_n_steps == 0) {
      for (Variable* v : model->variables()) {
        log->AddHistogram(v->name, step, v->value);
        if (v->trainable) log->AddHistogram(v->name + "/gradient", step, v->grad);
      }
    }
    if (chief && trigger.ShouldSave(step, Clock::now())) {
      RETURN_IF_ERROR(client->Checkpoint(step, o.train_dir));
      LOG(INFO) << who << ": step " << step << ": servers saved a checkpoint in " << o.train_dir;
    }
  }
  if (LeaveRequested()) {  // ~PsClient's heartbeat monitor says goodbye to every server
    LOG(INFO) << who << ": SIGTERM: leaving the job at global step " << step << " after "
              << local_steps << " local steps";
    MarkLeftOnSigterm();
    return Status::OK();
  }
  LOG(INFO) << who << ": reached step " << step << " after " << local_steps
            << " local steps; waiting for the others";
  RETURN_IF_ERROR(client->Barrier("done", num_workers + o.evaluators));
  if (!chief) return Status::OK();
  return FinishAsChief(o, s, model, device.get(), client.get(), std::move(log), synthetic, who);
}

Status RunEvaluator(const RoleOptions& o) {
  const std::string who = "evaluator " + std::to_string(o.task_index);
  // Kubeflow's operator writes TF_CONFIG's cluster without the evaluator, so every other role
  // counts none (--evaluators=0). Such an evaluator still evaluates while training runs, but the
  // final barrier does not wait for it, and a run that ends first ends it too.
  const bool counted = o.task_index < o.evaluators;
  ASSIGN_OR_RETURN(Setup s, Load(o));
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeDevice> device, ComputeDevice::Open(o.device, who));
  Model* model = s.model.get();
  ASSIGN_OR_RETURN(auto client,
                   PsClient::Connect(o.ps_hosts, "evaluator", o.task_index, model->variables(),
                                     o.partition_bytes, o.curve, o.replicas));
  client->set_unavailable_timeout(std::chrono::seconds(o.unavailable_timeout_secs));
  if (!counted) {
    // Servers gone for this long mean the run is over (or failed): nobody waits for this one.
    client->set_unavailable_timeout(
        std::min(std::chrono::seconds(o.unavailable_timeout_secs), std::chrono::seconds(30)));
    LOG(WARNING) << who << ": the cluster counts " << o.evaluators << " evaluator(s) (--evaluators,"
                 << " or TF_CONFIG's cluster, which Kubeflow's operator writes without the "
                 << "evaluator): this one evaluates while training runs, but the end does not "
                 << "wait for it (the chief evaluates the final model itself)";
  }
  RETURN_IF_ERROR(client->WaitUntilInitialized(std::chrono::seconds(o.init_timeout_secs)));
  RETURN_IF_ERROR(device->Place(model));
  std::unique_ptr<SummaryWriter> log;
  if (!o.logdir.empty()) {
    ASSIGN_OR_RETURN(log, SummaryWriter::Open(o.logdir, "eval"));
  }
  int64_t last = -1;
  for (;;) {
    const auto start = Clock::now();
    Result<int64_t> pulled = client->Pull();
    if (!pulled.ok() && !counted &&
        (pulled.status().code() == StatusCode::kOutOfRange ||
         pulled.status().code() == StatusCode::kUnavailable)) {
      LOG(INFO) << who << ": the servers have ended (" << pulled.status().ToString()
                << "), so has this uncounted evaluator; the last step it heard of: "
                << client->HeardStep();
      return Status::OK();
    }
    ASSIGN_OR_RETURN(int64_t step, std::move(pulled));
    if (step != last) {
      model->UploadVariables();
      ASSIGN_OR_RETURN(Evaluation e, Evaluate(model, s.input, s.train.seed));
      LOG(INFO) << who << ": step " << step << ": test accuracy " << std::fixed
                << std::setprecision(4) << e.accuracy << ", test loss " << e.loss;
      if (log) {
        log->AddScalar("accuracy", step, static_cast<float>(e.accuracy));
        log->AddScalar("loss", step, static_cast<float>(e.loss));
        RETURN_IF_ERROR(log->Flush());
      }
      last = step;
    }
    if (step >= s.max_steps) break;
    // The last step is evaluated as soon as the heartbeats carry it, not at the next interval:
    // the chief's final barrier waits for this evaluator.
    const auto next =
        start + std::chrono::milliseconds(static_cast<int64_t>(o.eval_interval_secs * 1000));
    while (Clock::now() < next && client->HeardStep() < s.max_steps) {
      std::this_thread::sleep_until(std::min(next, Clock::now() + std::chrono::milliseconds(200)));
    }
  }
  if (!counted) return Status::OK();
  return client->Barrier("done", static_cast<int>(o.worker_hosts.size()) + o.evaluators);
}

}  // namespace worker
}  // namespace pstrain
