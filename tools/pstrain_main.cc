// pstrain: one binary for every role of a cluster, with TensorFlow's flags:
//   pstrain --job_name=ps     --task_index=0 --ps_hosts=h:2222 --worker_hosts=h:2232,h:2233 ...
//   pstrain --job_name=worker --task_index=1 --ps_hosts=... --worker_hosts=... --config=...
//   pstrain --job_name=evaluator --ps_hosts=... --worker_hosts=... --config=...
// The launcher (launcher/pstrain-launch) writes these command lines from a cluster config; on
// Kubernetes, TensorFlow's TF_CONFIG (common/tf_config.h) may stand in for the cluster flags.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/config.h"
#include "common/flags.h"
#include "common/replication/shard_map.h"
#include "common/tf_config.h"
#include "common/wire/transport.h"
#include "ps/ps_role.h"
#include "tools/device_flags.h"
#include "tools/run_flags.h"
#include "worker/distributed/intra_node.h"
#include "worker/distributed/leave_signal.h"
#include "worker/distributed/pull_schedule.h"
#include "worker/distributed/push_dtype.h"
#include "worker/distributed/push_parts.h"
#include "worker/distributed/tf_checkpoint_writer.h"
#include "worker/distributed/worker_role.h"
#include "worker/network/model.h"
#include "worker/training/tf_layout.h"
#include "worker/training/warm_start.h"

DEFINE_string(job_name, "", "this process's role: ps, worker or evaluator");
DEFINE_int32(task_index, 0, "index of this task within its job");
DEFINE_string(ps_hosts, "", "comma-separated host:port of every parameter server task");
DEFINE_string(worker_hosts, "", "comma-separated host:port of every worker task");
DEFINE_string(config, "configs/refnet.yaml", "model and training config (YAML)");
DEFINE_string(train_dir, "", "checkpoints (servers save their shards under it)");
DEFINE_string(logdir, "", "TensorBoard logs (default <train_dir>/logs)");
DEFINE_string(checkpoint_path, "",
              "the chief's warm start: a fresh run's variables from this checkpoint (a file, or a "
              "directory's latest); the step and optimizer slots start fresh; a resumed run "
              "ignores it");
DEFINE_string(restore_exclude, "",
              "with --checkpoint_path: comma-separated variable names or globs left at their "
              "initial values (a fine-tuning's new layers)");
DEFINE_string(update_mode, "async", "how servers apply gradients: async, accumulate or sync");
DEFINE_int32(accumulate_n, 0, "accumulate mode: gradients per update (0: number of workers)");
DEFINE_int64(max_staleness, 0,
             "accumulate/sync: drop gradients computed more than this many updates ago");
DEFINE_int32(backup_workers, 0, "sync mode: update with the first (workers - backup) pushes");
DEFINE_int64(max_table_rows, 0,
             "servers: cap every embedding table's rows on each server (0: the config's "
             "max_rows); a pull that would pass it is refused naming the table and server");
DEFINE_int32(gradient_outlier_binades, 10,
             "servers scale down a push whose largest gradient element lies more than this many "
             "binades (powers of two) above its sender's recent median (or the senders' median, if "
             "lower); 0: off");
DEFINE_int32(min_workers, 0,
             "workers may join and leave a running job: the servers count the live workers "
             "(accumulate and sync N follows them) and apply nothing while fewer than this many "
             "are live; needs --intra_node_sync=off; 0: the fixed --worker_hosts count");
DEFINE_int32(max_workers, 0,
             "with --min_workers: the most worker tasks (task indices below it), at least the "
             "number of --worker_hosts; 0: that number");
DEFINE_int64(partition_bytes, pstrain::worker::kDefaultPartitionBytes,
             "split variables larger than this across servers (with --replicas: 1 MiB unless "
             "given, so that each part's record crosses to the backups while the rest arrives)");
DEFINE_double(log_every_n_secs, 10,
              "also a progress line once this many seconds passed since the last (0: by "
              "--log_every_n_steps only), so that the launcher's progress follows the global step");
DEFINE_int32(max_to_keep, 5, "checkpoints kept per server shard (and TensorFlow checkpoints)");
DEFINE_bool(tf_checkpoints, false,
            "chief: after each committed checkpoint, also write it as TensorFlow's checkpoint "
            "<train_dir>/tf/model.ckpt-<step> (listed in <train_dir>/tf/checkpoint, the newest "
            "--max_to_keep kept), when every server's shard is under the chief's --train_dir");
DEFINE_int32(io_threads, 0,
             "ZeroMQ I/O threads of this process, which carry its connections' bytes, one "
             "connection on each (0: 2, or 4 for a worker or evaluator of 6 or more parameter "
             "servers, whose host leader otherwise spends the step's exchange on too few cores: "
             "docs/scaling.md, simulated)");
DEFINE_int32(replicas, 0,
             "backups per shard (docs/replication.md): each shard's updates are also applied on "
             "this many other server tasks before a push is acknowledged, so a server's death "
             "loses nothing; 0: none, each shard on its own server");
DEFINE_int32(evaluators, 0, "evaluator tasks in the cluster (they join the final barrier)");
DEFINE_double(eval_interval_secs, 10, "evaluator: seconds between evaluations");
DEFINE_string(data_dir, "", "Fashion-MNIST IDX directory (default: the config's)");
DEFINE_bool(elastic_data, false,
            "workers lease chunks of the data from ps 0's ledger instead of reading example "
            "i % workers, so that workers may join and leave and each example is still used "
            "once per epoch (docs/replication.md section 6); every role needs the same value");
DEFINE_int64(data_chunk, 1024, "--elastic_data: examples per leased chunk");
DEFINE_string(curve_keys, "",
              "this role's CURVE key directory (from pstrain-keygen; the launcher passes it): "
              "servers let in only the cluster's workers and evaluators; empty: plaintext");
DEFINE_bool(same_host_ipc, true,
            "with --curve_keys: reach a parameter server at a loopback address over a Unix socket "
            "in its key directory (mode 0700), the key proved without CURVE's encryption; false: "
            "CURVE over TCP for every peer. Give every role of a cluster the same value");
DEFINE_bool(insecure, false,
            "without --curve_keys, serve plaintext (no authentication) on a non-loopback address "
            "anyway; by default a plaintext role listens on loopback only and refuses anything "
            "else");
DEFINE_int64(max_message_mb, 4096,
             "ps: the largest request accepted, in MiB (all tensors together); a larger one is "
             "refused before it is buffered whole (a single larger tensor frame drops the "
             "connection)");
DEFINE_double(ps_summary_secs, 10,
              "ps: seconds between each server's TensorBoard scalars (traffic, apply latency, "
              "pending requests, staleness, refusals) in <logdir>/ps-<task_index>; 0: none");
DEFINE_int32(ps_unavailable_timeout_secs, 600,
             "worker/evaluator: how long to keep retrying a parameter server that is down "
             "(e.g. being restarted) before failing");

DEFINE_string(intra_node_sync, "off",
              "off: every worker pushes; cpu: the workers on one host average their gradients in "
              "host memory and one pushes for the host; nccl: the same on their GPUs over NCCL. "
              "Give every role (servers too) the same value");

DEFINE_int32(synthetic_step_ms, 0,
             "worker: synthetic compute, to measure the exchange at scale without GPUs: skip "
             "forward and backward, wait this many ms a step (a GPU's time for the batch), push "
             "constant gradients of the model's real sizes; needs --device=cpu; 0: off");

DEFINE_string(overlap_push, "auto",
              "worker: true: push each part of the model's gradients as soon as backward has it, "
              "last layer first, and pull it back at once (async servers, no clip_by_global_norm, "
              "a CPU worker alone on its host; elsewhere one push a step, the reason logged); "
              "auto: the same unless every server is on loopback (no link to overlap with) and "
              "--pull_schedule=step; "
              "false: one push per server a step after backward");
DEFINE_string(pull_schedule,
              pstrain::worker::PullScheduleName(pstrain::worker::kDefaultPullSchedule),
              "worker: when a step reads the servers' values: step (every variable after the "
              "push), per_layer (every layer's pull sent at the step's start, each layer's forward "
              "waiting only for its own), late (each layer's pull sent just before its forward: "
              "the freshest values). per_layer and late need the overlapped push and turn it on, "
              "on loopback too (where it may not overlap, the step pulls after its push)");
DEFINE_string(push_dtype, "fp32",
              "worker: what gradients are pushed and the step's pulls answered in: fp32, or bf16 "
              "(bfloat16: half the bytes; the rounding error is carried into the next push, the "
              "servers keep float32 weights and optimizer slots for every update mode)");
DEFINE_int32(push_part_mb, pstrain::worker::kDefaultPushPartBytes >> 20,
             "worker, with --overlap_push: the size of a push's parts (MiB, 1 to 1024), as DDP's "
             "25 MB buckets or Horovod's fusion buffer (with --replicas: 1 unless given)");

namespace {

// Stops at start with a message naming the flag, as every role's first line of defence.
bool Fail(const std::string& message) {
  LOG(ERROR) << message;
  return false;
}

// --max_workers, or the --worker_hosts count when it is 0.
int MaxWorkers(const std::vector<std::string>& workers) {
  return FLAGS_max_workers > 0 ? FLAGS_max_workers : static_cast<int>(workers.size());
}

// --min_workers and --max_workers (workers joining and leaving, ps/membership.h).
bool ValidateElastic(const std::vector<std::string>& workers) {
  if (FLAGS_elastic_data && FLAGS_replicas > 0) {
    // The ledger lives on shard 0's head and its records do not carry it yet: a failover would
    // lose which examples were used (docs/replication.md, the data ledger).
    return Fail("--elastic_data and --replicas=" + std::to_string(FLAGS_replicas) +
                " do not go together yet: the data ledger is not replicated; use one of them");
  }
  if (FLAGS_min_workers < 0 || FLAGS_max_workers < 0) {
    return Fail("--min_workers and --max_workers must be >= 0, got " +
                std::to_string(FLAGS_min_workers) + " and " + std::to_string(FLAGS_max_workers));
  }
  if (FLAGS_min_workers == 0) {
    if (FLAGS_max_workers == 0) return true;
    return Fail("--max_workers=" + std::to_string(FLAGS_max_workers) +
                " needs --min_workers > 0 (workers joining and leaving); with --min_workers=0 "
                "the workers are the --worker_hosts");
  }
  const int max_workers = MaxWorkers(workers);
  if (max_workers < static_cast<int>(workers.size())) {
    return Fail("--max_workers=" + std::to_string(max_workers) + " is below the " +
                std::to_string(workers.size()) +
                " workers of --worker_hosts; expected at least that many");
  }
  if (FLAGS_min_workers > max_workers) {
    return Fail("--min_workers=" + std::to_string(FLAGS_min_workers) + " is above --max_workers=" +
                std::to_string(max_workers) + "; expected min_workers <= max_workers");
  }
  if (FLAGS_intra_node_sync != "off") {
    return Fail("--min_workers=" + std::to_string(FLAGS_min_workers) +
                " and --intra_node_sync=" + FLAGS_intra_node_sync +
                " do not go together: a host's group is fixed at start; use "
                "--intra_node_sync=off with workers that join and leave");
  }
  return true;
}

bool Validate(const std::vector<std::string>& ps, const std::vector<std::string>& workers) {
  const std::string job = FLAGS_job_name;
  if (job != "ps" && job != "worker" && job != "evaluator") {
    return Fail("--job_name must be ps, worker or evaluator, got '" + job + "'");
  }
  if (ps.empty()) return Fail("--ps_hosts is required (host:port of every parameter server)");
  if (workers.empty()) return Fail("--worker_hosts is required (host:port of every worker)");
  for (const auto& h : ps) {
    auto colon = h.rfind(':');
    if (colon == std::string::npos || colon + 1 == h.size() ||
        h.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return Fail("--ps_hosts entry '" + h + "' is not host:port");
    }
  }
  if (!ValidateElastic(workers)) return false;
  const size_t count = job == "ps"             ? ps.size()
                       : job != "worker"       ? 1
                       : FLAGS_min_workers > 0 ? static_cast<size_t>(MaxWorkers(workers))
                                               : workers.size();
  if (FLAGS_task_index < 0 || static_cast<size_t>(FLAGS_task_index) >= count) {
    return Fail("--task_index=" + std::to_string(FLAGS_task_index) + " is out of range for " +
                std::to_string(count) + " " + job + " task(s)");
  }
  if (FLAGS_train_dir.empty()) return Fail("--train_dir is required");
  if (FLAGS_max_message_mb < 1 || FLAGS_max_message_mb > (int64_t{1} << 20)) {
    return Fail("--max_message_mb must be from 1 to 1048576 (MiB), got " +
                std::to_string(FLAGS_max_message_mb));
  }
  if (FLAGS_update_mode != "accumulate" && FLAGS_accumulate_n != 0) {
    return Fail("--accumulate_n applies only to --update_mode=accumulate, got --update_mode=" +
                FLAGS_update_mode);
  }
  auto sync = pstrain::worker::ParseIntraNodeSync(FLAGS_intra_node_sync);
  if (!sync.ok()) return Fail(sync.status().message());
  // With intra-node sync the servers hear from one worker per host.
  const int pushers = pstrain::worker::NumPushers(workers, sync.value());
  if (FLAGS_backup_workers < 0 || (FLAGS_backup_workers > 0 && (FLAGS_update_mode != "sync" ||
                                                                FLAGS_backup_workers >= pushers))) {
    return Fail("--backup_workers must be below the number of pushing workers (" +
                std::to_string(pushers) + ") and needs --update_mode=sync");
  }
  if (FLAGS_max_staleness < 0) return Fail("--max_staleness must be >= 0");
  if (FLAGS_gradient_outlier_binades < 0 || FLAGS_gradient_outlier_binades > 100) {
    return Fail("--gradient_outlier_binades must be from 0 (off) to 100, got " +
                std::to_string(FLAGS_gradient_outlier_binades));
  }
  if (FLAGS_synthetic_step_ms < 0 || FLAGS_synthetic_step_ms > 600000) {
    return Fail("--synthetic_step_ms must be from 0 (off) to 600000 ms, got " +
                std::to_string(FLAGS_synthetic_step_ms));
  }
  if (FLAGS_overlap_push != "auto" && FLAGS_overlap_push != "true" &&
      FLAGS_overlap_push != "false") {
    return Fail("--overlap_push must be auto, true or false, got '" + FLAGS_overlap_push + "'");
  }
  if (auto schedule = pstrain::worker::ParsePullSchedule(FLAGS_pull_schedule); !schedule.ok()) {
    return Fail(schedule.status().message());
  }
  if (auto dtype = pstrain::worker::ParsePushDType(FLAGS_push_dtype); !dtype.ok()) {
    return Fail(dtype.status().message());
  }
  if (FLAGS_push_part_mb < 1 || FLAGS_push_part_mb > 1024) {
    return Fail("--push_part_mb must be from 1 to 1024 (MiB), got " +
                std::to_string(FLAGS_push_part_mb));
  }
  if (!(FLAGS_ps_summary_secs >= 0)) return Fail("--ps_summary_secs must be >= 0 (0: none)");
  // Every role places the replicas the same way; too many for --ps_hosts is refused by name.
  if (auto placed = pstrain::replication::PlaceReplicas(ps, FLAGS_replicas); !placed.ok()) {
    return Fail(placed.status().message());
  }
  return true;
}

std::string Join(const std::vector<std::string>& hosts) {
  std::string out;
  for (const std::string& h : hosts) out += (out.empty() ? "" : ",") + h;
  return out;
}

// TensorFlow's TF_CONFIG (as Kubeflow's TFJob operator sets it), if present, fills in the
// cluster flags that were not given explicitly: explicit flags win. A malformed TF_CONFIG stops
// the role at start, naming the field.
bool ApplyTfConfig() {
  const char* env = std::getenv("TF_CONFIG");
  if (env == nullptr || *env == '\0') return true;
  auto role = pstrain::ParseTfConfig(env);
  if (!role.ok()) return Fail(role.status().message());
  const std::vector<std::pair<std::string, std::string>> from_env = {
      {"job_name", role->job_name},
      {"task_index", std::to_string(role->task_index)},
      {"ps_hosts", Join(role->ps_hosts)},
      {"worker_hosts", Join(role->worker_hosts)},
      {"evaluators", std::to_string(role->evaluators)}};
  std::string taken, kept;
  for (const auto& [name, value] : from_env) {
    if (gflags::GetCommandLineFlagInfoOrDie(name.c_str()).is_default) {
      gflags::SetCommandLineOption(name.c_str(), value.c_str());
      taken += " --" + name + "=" + value;
    } else {
      kept += " --" + name;
    }
  }
  LOG(INFO) << "TF_CONFIG:" << (taken.empty() ? " nothing taken" : taken)
            << (kept.empty() ? "" : " (given explicitly, so kept:" + kept + ")");
  return true;
}

// --io_threads, or its default for the role and `num_ps` servers, set before the first socket and
// said where not 2; false (logged) for a value out of range.
bool SetIoThreads(int num_ps) {
  const int threads = FLAGS_io_threads > 0     ? FLAGS_io_threads
                      : FLAGS_job_name == "ps" ? 2
                                               : pstrain::worker::ClientIoThreads(num_ps);
  if (pstrain::Status s = pstrain::wire::SetIoThreads(threads); !s.ok()) {
    LOG(ERROR) << "--io_threads=" << FLAGS_io_threads << ": " << s.message();
    return false;
  }
  if (threads != 2) {
    LOG(INFO) << FLAGS_job_name << " " << FLAGS_task_index << ": " << threads
              << " ZeroMQ I/O threads"
              << (FLAGS_io_threads > 0 ? ""
                                       : " (" + std::to_string(num_ps) +
                                             " parameter servers; --io_threads chooses)");
  }
  return true;
}

// --partition_bytes and --push_part_mb, or their defaults for --replicas and for `num_ps` server
// tasks, said once.
pstrain::worker::PushSizes ChosenPushSizes(int num_ps) {
  auto given = [](const char* name, int64_t value) {
    return gflags::GetCommandLineFlagInfoOrDie(name).is_default ? std::nullopt
                                                                : std::optional<int64_t>(value);
  };
  const pstrain::worker::PushSizes sizes = pstrain::worker::ChoosePushSizes(
      FLAGS_replicas, num_ps, given("partition_bytes", FLAGS_partition_bytes),
      given("push_part_mb", int64_t{FLAGS_push_part_mb} << 20));
  if (FLAGS_replicas == 0 && num_ps >= pstrain::worker::kManyServers) {
    LOG(INFO) << FLAGS_job_name << " " << FLAGS_task_index << ": " << num_ps
              << " parameter servers: variables split above " << sizes.partition_bytes
              << " bytes, pushed in parts of " << sizes.part_bytes
              << " bytes (each server holds a small share; smaller pieces keep it balanced and let "
              << "it leave as backward finishes it; --partition_bytes and --push_part_mb choose)";
  }
  if (FLAGS_replicas > 0) {
    LOG(INFO) << FLAGS_job_name << " " << FLAGS_task_index << ": --replicas=" << FLAGS_replicas
              << ": variables split above " << sizes.partition_bytes
              << " bytes, pushed in parts of " << sizes.part_bytes
              << " bytes (small parts let each record reach the backups while "
              << "the rest of the push arrives; --partition_bytes and --push_part_mb choose)";
  }
  return sizes;
}

// Every variable of --config's model in bytes: a server never builds the model, but the largest
// message a worker sends it follows from it (ps/message_bound.h).
pstrain::Result<int64_t> ModelVariableBytes(const std::string& config_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<pstrain::worker::Model> model,
                   pstrain::worker::Model::FromConfigFile(config_path));
  int64_t bytes = 0;
  for (const pstrain::worker::Variable* v : model->variables()) {
    bytes += v->value.size() * static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "one role of a pstrain cluster.\n  pstrain --job_name=ps|worker|evaluator --task_index=N "
      "--ps_hosts=h:p,... --worker_hosts=h:p,... --config=FILE --train_dir=DIR");
  pstrain::ParseFlags(&argc, &argv,
                      {"tools/pstrain_main.cc", "tools/device_flags.cc", "tools/run_flags.cc"});
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1] << "' (flags are --name=value)";
    return 2;
  }
  if (!ApplyTfConfig()) return 2;
  const auto ps = pstrain::worker::SplitList(FLAGS_ps_hosts),
             workers = pstrain::worker::SplitList(FLAGS_worker_hosts);
  if (!Validate(ps, workers)) return 2;
  std::filesystem::create_directories(FLAGS_train_dir);
  const std::string logdir = FLAGS_logdir.empty() ? FLAGS_train_dir + "/logs" : FLAGS_logdir;
  pstrain::wire::ClusterKeys curve;  // plaintext unless --curve_keys
  if (!FLAGS_curve_keys.empty()) {
    auto keys = pstrain::wire::LoadClusterKeys(FLAGS_curve_keys, FLAGS_job_name, FLAGS_task_index);
    if (!keys.ok()) {
      LOG(ERROR) << "--curve_keys: " << keys.status().message();
      return 2;
    }
    curve = std::move(keys).value();
    curve.same_host_ipc = FLAGS_same_host_ipc;
  }
  if (!SetIoThreads(static_cast<int>(ps.size()))) return 2;
  pstrain::Status status;
  if (FLAGS_job_name == "ps") {
    auto mode = pstrain::ps::ParseUpdateMode(FLAGS_update_mode);
    if (!mode.ok()) {
      LOG(ERROR) << mode.status().message();
      return 2;
    }
    pstrain::ps::PsRoleOptions o;
    o.server.task_index = FLAGS_task_index;
    o.server.num_ps = static_cast<int>(ps.size());
    // Workers that push: one per host when they sync within hosts.
    o.server.num_workers = pstrain::worker::NumPushers(
        workers, pstrain::worker::ParseIntraNodeSync(FLAGS_intra_node_sync).value());
    o.server.cluster = {static_cast<int>(workers.size()), FLAGS_evaluators};
    o.server.min_workers = FLAGS_min_workers;
    if (FLAGS_min_workers > 0) {  // task indices up to --max_workers, the live ones counted
      o.server.cluster.workers = MaxWorkers(workers);
      o.server.cluster.workers_flag = "--max_workers";
    }
    o.server.mode = mode.value();
    o.server.one_push_per_pull = true;
    o.server.accumulate_n = FLAGS_accumulate_n;
    o.server.max_staleness = FLAGS_max_staleness;
    o.server.outlier_binades = FLAGS_gradient_outlier_binades;
    o.server.backup_workers = FLAGS_backup_workers;
    o.server.train_dir = FLAGS_train_dir;
    o.server.max_to_keep = FLAGS_max_to_keep;
    o.server.replicas = FLAGS_replicas;
    if (FLAGS_elastic_data) {  // shard 0's holders keep the data ledger (any task, with replicas)
      pstrain::worker::RoleOptions ro;
      ro.config_path = FLAGS_config;
      ro.data_dir = FLAGS_data_dir;
      ro.epochs = FLAGS_epochs;
      auto data = pstrain::worker::ReadElasticData(ro);
      if (!data.ok()) {
        LOG(ERROR) << "--elastic_data: " << data.status().ToString();
        return 2;
      }
      o.server.data = {data->examples, FLAGS_data_chunk, data->epochs, data->seed};
      if (pstrain::Status s = pstrain::ps::CheckDataLedgerOptions(o.server.data); !s.ok()) {
        LOG(ERROR) << "--elastic_data: " << s.message();
        return 2;
      }
    }
    o.logdir = logdir;
    o.summary_secs = FLAGS_ps_summary_secs;
    o.max_table_rows = FLAGS_max_table_rows;
    o.config_path = FLAGS_config;
    o.bind_host_port = ps[FLAGS_task_index];
    o.ps_hosts = ps;
    o.curve = curve;
    o.insecure = FLAGS_insecure;
    o.limits.max_total_bytes = static_cast<size_t>(FLAGS_max_message_mb) << 20;
    o.limits.max_tensor_bytes = std::min(o.limits.max_tensor_bytes, o.limits.max_total_bytes);
    auto variable_bytes = ModelVariableBytes(FLAGS_config);
    if (!variable_bytes.ok()) {
      LOG(ERROR) << "ps " << FLAGS_task_index
                 << ": --config: " << variable_bytes.status().ToString();
      return 2;
    }
    o.variable_bytes = variable_bytes.value();
    status = pstrain::ps::RunParameterServer(o);
  } else {
    pstrain::worker::RoleOptions o;
    o.task_index = FLAGS_task_index;
    o.ps_hosts = ps;
    o.worker_hosts = workers;
    o.evaluators = FLAGS_evaluators;
    o.config_path = FLAGS_config;
    o.train_dir = FLAGS_train_dir;
    o.logdir = logdir;
    o.data_dir = FLAGS_data_dir;
    o.checkpoint_path = FLAGS_checkpoint_path;
    o.restore_exclude = FLAGS_restore_exclude;
    const pstrain::worker::PushSizes sizes = ChosenPushSizes(static_cast<int>(ps.size()));
    o.partition_bytes = sizes.partition_bytes;
    pstrain::worker::SetRunScheduleFromFlags(&o);  // --max_steps, --epochs...
    o.log_every_n_secs = std::max(0.0, FLAGS_log_every_n_secs);
    o.eval_interval_secs = FLAGS_eval_interval_secs;
    o.curve = curve;
    o.insecure = FLAGS_insecure;
    o.unavailable_timeout_secs = FLAGS_ps_unavailable_timeout_secs;
    o.device = pstrain::worker::DeviceOptionsFromFlags();  // --device, --allow_soft_placement...
    o.intra_node_sync = FLAGS_intra_node_sync;
    o.synthetic_step_ms = FLAGS_synthetic_step_ms;
    o.async = FLAGS_update_mode == "async";
    o.overlap_push = FLAGS_overlap_push;
    o.push_part_bytes = sizes.part_bytes;
    o.pull_schedule = pstrain::worker::ParsePullSchedule(FLAGS_pull_schedule).value();
    o.min_workers = FLAGS_min_workers;
    o.elastic_data = FLAGS_elastic_data;
    o.replicas = FLAGS_replicas;
    o.push_dtype = pstrain::worker::ParsePushDType(FLAGS_push_dtype).value();
    if (FLAGS_tf_checkpoints && FLAGS_job_name == "worker" && FLAGS_task_index == 0) {
      // Adam's betas, and the dense kernels over a flattened feature map.
      auto bundle = pstrain::TfExportOptionsOfConfigFile(FLAGS_config);
      if (!bundle.ok()) {
        LOG(ERROR) << "--tf_checkpoints: " << bundle.status().ToString();
        return 2;
      }
      pstrain::worker::SetChiefTfCheckpointWriter(
          std::make_unique<pstrain::worker::TfCheckpointWriter>(
              pstrain::worker::TfCheckpointOptions{FLAGS_max_to_keep, bundle.value()}));
    }
    status = FLAGS_job_name == "worker" ? pstrain::worker::RunWorker(o)
                                        : pstrain::worker::RunEvaluator(o);
  }
  if (!status.ok()) {
    LOG(ERROR) << FLAGS_job_name << " " << FLAGS_task_index << ": " << status.ToString();
    return 1;
  }
  // A worker that left on SIGTERM exits as one killed by it would, after its goodbye.
  if (pstrain::worker::LeftOnSigterm()) return 128 + SIGTERM;
  return 0;
}
