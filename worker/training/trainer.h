// Single-process training: one loop over a TrainingInput (training_input.h: an image model's
// input pipeline, or a click model's Examples and sparse tables), the dense variables' updates
// through ps::VariableStore (the same code a parameter server runs), progress lines, evaluation
// on the test set, TensorBoard summaries, checkpoints that resume a stopped run, and at the end
// model.safetensors (and a click model's model.onnx) in the train_dir.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "worker/network/device_placement.h"

namespace pstrain {
namespace worker {

struct TrainerOptions {
  std::string config_path;
  std::string train_dir;  // checkpoints (resumed from when it holds one), the final exports
  std::string logdir;     // TensorBoard event files (train/ and eval/)
  int64_t max_steps = 0;  // 0: the config's train.max_steps, else its epochs
  int64_t epochs = 0;     // 0: the config's train.epochs
  int64_t log_every_n_steps = 100;
  double log_every_n_secs = 0;     // also a progress line once this long passed (0: steps only)
  int64_t eval_every_n_steps = 0;  // 0: at the end of every epoch
  int64_t summary_every_n_steps = 100;
  int64_t histogram_every_n_steps = 500;
  int64_t save_checkpoints_steps = 0;
  double save_checkpoints_secs = 60;
  int max_to_keep = 5;
  std::string checkpoint_path;  // restore this one instead of the latest
  std::string restore_exclude;  // comma-separated name prefixes/globs not to restore
  std::string data_dir;         // overrides input.data_dir
  double stop_at_accuracy = 0;  // stop after an evaluation reaching this (0: never)
  int64_t max_table_rows = 0;   // caps every sparse table's max_rows (0: the config's)
  std::string command_line;     // for the TensorBoard text summary
  DeviceOptions device;         // --device, --allow_soft_placement, ...
};

struct TrainResult {
  int64_t global_step = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  double test_auc = -1;  // two-class (click) models only
  double test_log_loss = 0;
  double train_seconds = 0;
};

Result<TrainResult> Train(const TrainerOptions& options);

}  // namespace worker
}  // namespace pstrain
