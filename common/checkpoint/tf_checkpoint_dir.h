// A directory of TensorFlow checkpoints kept as tf.compat.v1.train.Saver keeps one: bundles
// model.ckpt-<step>.{index,data-00000-of-00001} listed, oldest first, in a `checkpoint` state file
// (checkpoint_index.h), the newest max_to_keep kept and older ones deleted, so
// tf.train.latest_checkpoint and tf.train.get_checkpoint_state read it as TensorFlow's own.
// Written by pstrain-checkpoint to_tf and by the chief after each committed cluster checkpoint
// (worker/distributed/tf_checkpoint_writer.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/status.h"

namespace pstrain {

struct TfCheckpointDirOptions {
  TfExportOptions bundle;
  // Bundles kept, newest first; <= 0 keeps every one.
  int max_to_keep = 0;
  // Listed steps for which this is false are taken out of the state file and deleted (steps the
  // cluster no longer stands behind); null keeps every listed step.
  std::function<bool(int64_t)> keep_step;
};

// Writes `data` as <dir>/model.ckpt-<global_step> (creating `dir`), makes it the newest in
// <dir>/checkpoint (rewritten atomically, after the bundle), then deletes the bundles the state
// file no longer lists. Returns the prefix written. InvalidArgument when <dir>/checkpoint lists
// a file that is no TensorFlow bundle (a pstrain train_dir, which TF's tools would misread).
Result<std::string> SaveTfCheckpointInDir(const std::string& dir, const CheckpointData& data,
                                          const TfCheckpointDirOptions& options);

}  // namespace pstrain
