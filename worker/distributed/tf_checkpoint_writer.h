// The chief's TensorFlow checkpoints during a run (--tf_checkpoints), as TF's chief Saver writes
// model.ckpt-<step> beside its `checkpoint` file without a separate conversion: after each
// committed cluster checkpoint (cluster_checkpoint.h), that step's shards, read from the chief's
// train_dir and joined (joined_checkpoint.h), become <train_dir>/tf/model.ckpt-<step>.{index,
// data-00000-of-00001}, listed in <train_dir>/tf/checkpoint with committed steps only, the newest
// max_to_keep kept (tf_checkpoint_dir.h).
//
// Servers that keep their shards on other hosts' disks leave nothing to read under the chief's
// train_dir: nothing is written, which the log says once (`pstrain-checkpoint to_tf` converts
// the shards where they are). A failed write is a warning naming the file, never the end of the
// run: the cluster checkpoint is committed already, and TensorFlow's copy is only a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/checkpoint/tf_checkpoint.h"
#include "common/status.h"

namespace pstrain::worker {

struct TfCheckpointOptions {
  int max_to_keep = 5;  // <= 0 keeps every one
  TfExportOptions bundle;
};

// <train_dir>/tf
std::string TfCheckpointDirectory(const std::string& train_dir);

class TfCheckpointWriter {
 public:
  explicit TfCheckpointWriter(TfCheckpointOptions options) : options_(options) {}

  // Writes committed step `step` of `train_dir`; returns the prefix written. FailedPrecondition
  // when its shards are not all under train_dir (or `step` is not the newest restorable step
  // there); otherwise the error of the read or the write, naming the file.
  Result<std::string> Write(const std::string& train_dir, int64_t step) const;
  // Write, its failure a warning (the missing shards only the first time).
  void WriteOrWarn(const std::string& train_dir, int64_t step);

 private:
  TfCheckpointOptions options_;
  bool said_shards_elsewhere_ = false;
};

// The chief's writer, set once at start from --tf_checkpoints; none (the default) writes nothing.
void SetChiefTfCheckpointWriter(std::unique_ptr<TfCheckpointWriter> writer);
// Called once a cluster checkpoint is committed: the chief's writer's WriteOrWarn, if any.
void AfterCheckpointCommitted(const std::string& train_dir, int64_t step);

}  // namespace pstrain::worker
