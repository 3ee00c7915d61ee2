// pstrain-train: trains a model from a config in one process (the main job of the README).
//   pstrain-train --config=configs/refnet.yaml --train_dir=runs/refnet --logdir=runs/refnet/logs
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>

#include "common/flags.h"
#include "tools/device_flags.h"
#include "worker/training/trainer.h"

DEFINE_string(config, "configs/refnet.yaml", "model and training config (YAML)");
DEFINE_string(train_dir, "", "directory for checkpoints; a run resumes from its latest one");
DEFINE_string(logdir, "", "TensorBoard log directory (default: <train_dir>/logs)");
DEFINE_int64(max_steps, 0, "stop at this global step (0: the config's max_steps or epochs)");
DEFINE_int64(epochs, 0, "epochs to train (0: the config's train.epochs)");
DEFINE_int64(log_every_n_steps, 100, "steps between progress lines and scalar summaries");
DEFINE_int64(eval_every_n_steps, 0, "steps between test-set evaluations (0: every epoch)");
DEFINE_int64(histogram_every_n_steps, 500, "steps between variable/gradient histograms");
DEFINE_int64(save_checkpoints_steps, 0, "save a checkpoint every N steps (0: by time only)");
DEFINE_double(save_checkpoints_secs, 60, "save a checkpoint every N seconds (0: by steps only)");
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

int main(int argc, char** argv) {
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  gflags::SetUsageMessage("Trains a model from a config in one process.\n  " +
                          std::string(argv[0]) + " --config=configs/refnet.yaml --train_dir=DIR");
  pstrain::ParseFlags(&argc, &argv, {"tools/train_main.cc", "tools/device_flags.cc"});
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
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
  o.max_steps = FLAGS_max_steps;
  o.epochs = FLAGS_epochs;
  o.log_every_n_steps = std::max<int64_t>(1, FLAGS_log_every_n_steps);
  o.eval_every_n_steps = FLAGS_eval_every_n_steps;
  o.histogram_every_n_steps = FLAGS_histogram_every_n_steps;
  o.save_checkpoints_steps = FLAGS_save_checkpoints_steps;
  o.save_checkpoints_secs = FLAGS_save_checkpoints_secs;
  o.max_to_keep = FLAGS_max_to_keep;
  o.checkpoint_path = FLAGS_checkpoint_path;
  o.restore_exclude = FLAGS_restore_exclude;
  o.data_dir = FLAGS_data_dir;
  o.stop_at_accuracy = FLAGS_stop_at_accuracy;
  o.command_line = command_line;
  auto result = pstrain::worker::Train(o);
  if (!result.ok()) {
    LOG(ERROR) << result.status().ToString();
    return 1;
  }
  std::printf(
      "done: global step %ld, test accuracy %.4f, test loss %.4f, %.1f s\n"
      "checkpoints in %s; TensorBoard: tensorboard --logdir %s\n",
      static_cast<long>(result->global_step), result->test_accuracy, result->test_loss,
      result->train_seconds, o.train_dir.c_str(), o.logdir.c_str());
  return 0;
}
