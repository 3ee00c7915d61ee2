// Numbered checkpoints in a training directory with TF's tf.train.Saver semantics: each save
// writes <train_dir>/<basename>-<global_step>, records it in the `checkpoint` index file (TF's
// text format) and deletes the oldest beyond max_to_keep. The index is re-read on every call,
// so a restarted trainer continues where the previous one left off.
//
// Restoring "the latest" departs from TF on purpose: a latest file that does not read back whole
// (a torn write, a bad disk) is skipped with a warning naming it and why, and the newest one
// that does is restored, so that a restart after such a fault resumes instead of failing in a
// loop. A checkpoint the user names (Restore, --checkpoint_path) is read strictly.
//
// What the index lists may also be TensorFlow bundles (a TF train_dir, whose `checkpoint` file
// names model.ckpt-N prefixes): they are read through tf_checkpoint.h in pstrain's names.
#pragma once

#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/status.h"

namespace pstrain {

class CheckpointManager {
 public:
  // max_to_keep <= 0 keeps every checkpoint, as in TF.
  CheckpointManager(std::string train_dir, int max_to_keep, std::string basename = "model.ckpt");

  // Writes the checkpoint (creating train_dir if needed), makes it the latest in the index, then
  // deletes the oldest files beyond max_to_keep. Returns the path written. Saving a step that is
  // already listed (after restoring an earlier one) replaces it.
  Result<std::string> Save(const CheckpointData& data);

  // Path of the latest checkpoint; NotFound when there is no index yet.
  Result<std::string> LatestPath() const;
  // Paths listed in the index, oldest first (latest last); empty when there is no index yet.
  Result<std::vector<std::string>> AllPaths() const;
  // back = 0 is the latest, 1 the one before it, ...; OutOfRange beyond the oldest kept.
  Result<std::string> PathFromLatest(int back) const;
  // What a --checkpoint_path flag may name: a checkpoint in train_dir ("model.ckpt-200"), a
  // path to one, or a directory holding an index (its latest checkpoint).
  Result<std::string> ResolvePath(const std::string& name_or_path) const;

  // The newest listed checkpoint that reads back whole; each newer one that is corrupt or
  // missing is skipped with a warning naming the file and the reason. NotFound when there is no
  // index; when no listed file reads back, the newest one's error naming every file tried.
  Result<CheckpointData> RestoreLatest() const;
  // Strict: the named checkpoint or its error (DataLoss naming the file when it is corrupt).
  Result<CheckpointData> Restore(const std::string& name_or_path) const;

  // Takes `paths` (as AllPaths() gives them) out of the index, which is rewritten atomically
  // (and removed when nothing is left); the files themselves are the caller's.
  Status RemoveFromIndex(const std::vector<std::string>& paths) const;

  const std::string& train_dir() const { return train_dir_; }
  // <train_dir>/checkpoint
  std::string index_path() const;

  // How a TensorFlow checkpoint's dense kernels map onto the model's (tf_checkpoint.h); none by
  // default, which reads every rank-2 kernel as transposed only.
  void set_tf_layout(TfLayout layout) { tf_layout_ = std::move(layout); }

 private:
  std::string Join(const std::string& name) const;

  std::string train_dir_;
  int max_to_keep_;
  std::string basename_;
  TfLayout tf_layout_;
};

}  // namespace pstrain
