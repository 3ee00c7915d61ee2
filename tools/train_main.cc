// pstrain-train: trains a model from a config in one process (the main job of the README).
//   pstrain-train --config=configs/refnet.yaml --train_dir=runs/refnet --logdir=runs/refnet/logs
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/flags.h"
#include "common/signal_watch.h"
#include "tools/device_flags.h"
#include "tools/run_flags.h"
#include "worker/training/trainer.h"

DEFINE_string(config, "configs/refnet.yaml", "model and training config (YAML)");
DEFINE_string(train_dir, "", "directory for checkpoints; a run resumes from its latest one");
DEFINE_string(logdir, "", "TensorBoard log directory (default: <train_dir>/logs)");
DEFINE_double(log_every_n_secs, 0,
              "also a progress line (and its scalars) once this many seconds of training "
              "passed since the last (0: by --log_every_n_steps only)");
DEFINE_int64(eval_every_n_steps, 0, "steps between test-set evaluations (0: every epoch)");
DEFINE_int32(max_to_keep, 5, "checkpoints kept in --train_dir (0 keeps all)");
DEFINE_string(checkpoint_path, "",
              "restore this checkpoint (a name in --train_dir or a path) instead of the latest");
DEFINE_string(restore_exclude, "",
              "comma-separated variable prefixes or globs not to restore (fine-tuning), "
              "e.g. fc2/");
DEFINE_string(data_dir, "",
              "Fashion-MNIST IDX directory (default: the config's, else "
              "/usr/share/datasets/fashion-mnist)");
DEFINE_double(stop_at_accuracy, 0, "stop once an evaluation reaches this test accuracy");
DEFINE_int64(
    max_table_rows, 0,
    "the most rows any sparse embedding table may hold, below its config's max_rows "
    "(0: each table's max_rows); a batch that would pass it stops the run naming the table");

namespace {

// Set in the re-executed process only, so that it says once why it was started again.
constexpr char kReexecMarker[] = "PSTRAIN_TRAIN_SET_OMP_WAIT_POLICY";

// GOMP's default waits spin: on a loaded machine idle OpenMP threads take whole time slices
// from the ones working (3.4x slower on 2 busy cores, docs/performance.md fix 6). libgomp reads
// OMP_WAIT_POLICY once, when it loads, before main; so when the user has not set it, start this
// binary again with PASSIVE, as pstrain-launch runs every role. The user's value always wins.
// Returns only when no re-exec happened (set already, or exec failed: *exec_error says why).
void ReexecWithPassiveOpenMpWaits(char** argv, std::string* exec_error) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  setenv(kReexecMarker, "1", 1);
  execv("/proc/self/exe", argv);
  *exec_error = std::strerror(errno);
  unsetenv("OMP_WAIT_POLICY");
  unsetenv(kReexecMarker);
}

// After logging starts: says once what the re-exec did, and hides the marker from children.
void LogOpenMpWaitPolicy(const std::string& exec_error) {
  if (!exec_error.empty()) {
    LOG(WARNING) << "OMP_WAIT_POLICY is unset and re-executing /proc/self/exe with "
                    "OMP_WAIT_POLICY=PASSIVE failed ("
                 << exec_error << "): OpenMP threads spin while idle; set it by hand";
  } else if (std::getenv(kReexecMarker) != nullptr) {
    unsetenv(kReexecMarker);
    LOG(INFO) << "OMP_WAIT_POLICY was unset: running with OMP_WAIT_POLICY=PASSIVE (idle OpenMP "
                 "threads sleep instead of spinning, as pstrain-launch runs roles; set "
                 "OMP_WAIT_POLICY yourself to choose)";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string exec_error;
  ReexecWithPassiveOpenMpWaits(argv, &exec_error);
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  gflags::SetUsageMessage("Trains a model from a config in one process.\n  " +
                          std::string(argv[0]) + " --config=configs/refnet.yaml --train_dir=DIR");
  pstrain::ParseFlags(&argc, &argv,
                      {"tools/train_main.cc", "tools/device_flags.cc", "tools/run_flags.cc"});
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  // Before any thread: Ctrl-C or SIGTERM ends the run with a checkpoint, and interrupts nothing.
  if (const pstrain::Status watched = pstrain::WatchSignals({SIGINT, SIGTERM}); !watched.ok()) {
    LOG(ERROR) << watched.ToString();
    return 1;
  }
  LogOpenMpWaitPolicy(exec_error);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1] << "' (flags are --name=value)";
    return 2;
  }
  if (FLAGS_train_dir.empty()) {
    LOG(ERROR) << "--train_dir is required (checkpoints go there, and a run resumes from it)";
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(FLAGS_train_dir, ec);
  if (ec) {
    LOG(ERROR) << "cannot create --train_dir=" << FLAGS_train_dir << ": " << ec.message();
    return 2;
  }
  pstrain::worker::TrainerOptions o;
  o.device = pstrain::worker::DeviceOptionsFromFlags();
  if (auto valid = pstrain::worker::ValidateDeviceOptions(o.device); !valid.ok()) {
    LOG(ERROR) << valid.message();
    return 2;
  }
  o.config_path = FLAGS_config;
  o.train_dir = FLAGS_train_dir;
  o.logdir = FLAGS_logdir.empty() ? FLAGS_train_dir + "/logs" : FLAGS_logdir;
  pstrain::worker::SetRunScheduleFromFlags(&o);  // --max_steps, --epochs...
  o.log_every_n_secs = std::max(0.0, FLAGS_log_every_n_secs);
  o.eval_every_n_steps = FLAGS_eval_every_n_steps;
  o.max_to_keep = FLAGS_max_to_keep;
  o.checkpoint_path = FLAGS_checkpoint_path;
  o.restore_exclude = FLAGS_restore_exclude;
  o.data_dir = FLAGS_data_dir;
  o.stop_at_accuracy = FLAGS_stop_at_accuracy;
  o.max_table_rows = FLAGS_max_table_rows;
  o.command_line = command_line;
  auto result = pstrain::worker::Train(o);
  if (!result.ok()) {
    LOG(ERROR) << result.status().ToString();
    return 1;
  }
  std::printf("done: global step %ld, test accuracy %.4f, test loss %.4f, %.1f s\n",
              static_cast<long>(result->global_step), result->test_accuracy, result->test_loss,
              result->train_seconds);
  if (result->test_auc >= 0) {
    std::printf("test AUC %.4f, test log loss %.4f\n", result->test_auc, result->test_log_loss);
  }
  std::printf("checkpoints in %s; TensorBoard: tensorboard --logdir %s\n", o.train_dir.c_str(),
              o.logdir.c_str());
  return 0;
}
