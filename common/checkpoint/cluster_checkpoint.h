// A cluster checkpoint is one global step saved by every parameter server, each writing its own
// shard file <train_dir>/ps-<k>-of-<n>/model.ckpt-<step> durably, and then committed by the chief
// in <train_dir>/committed_checkpoints once every server has answered that its file is on disk,
// as TensorFlow's sharded Saver writes its `checkpoint` state file only after every shard.
// The record uses the shards' own index format (TF's CheckpointState text):
//   model_checkpoint_path: "model.ckpt-300"          the newest committed step
//   all_model_checkpoint_paths: "model.ckpt-150"     every committed step, oldest first
//   all_model_checkpoint_paths: "model.ckpt-300"
// where each name stands for that step's file in every ps-<k>-of-<n> directory. It is not named
// `checkpoint` because it lists no file beside it, which is what pstrain-train, pstrain-checkpoint
// and TF's tools take a `checkpoint` file to do.
//
// A restore takes the newest committed step that every shard holds whole, so shards are never
// restored from different steps: a step one shard wrote and another did not (a kill between
// their saves) was never committed, and a damaged shard file of a committed step makes the
// whole cluster fall back to an older step. The chief decides (worker/distributed/ps_client.h); servers only
// report which steps they hold whole and restore the one they are told.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

// <train_dir>/ps-<task>-of-<num_ps>
std::string ShardDirectory(const std::string& train_dir, int task, int num_ps);
// "model.ckpt-<step>"
std::string CheckpointName(int64_t step);
// The step in a checkpoint name or path ("/d/model.ckpt-300" -> 300); nullopt if it has none.
std::optional<int64_t> StepOfCheckpoint(const std::string& name_or_path);

// <train_dir>/committed_checkpoints
std::string CommitRecordPath(const std::string& train_dir);

// The committed steps, oldest first; NotFound when the record does not exist (a run that has
// committed nothing yet, or one written before commits existed), DataLoss naming it if unreadable.
Result<std::vector<int64_t>> ReadCommittedSteps(const std::string& train_dir);
// Records `step` as the newest committed one (atomically: the record is whole, old or new) and
// forgets the oldest beyond `keep` (<= 0 keeps all).
Status CommitStep(const std::string& train_dir, int64_t step, int keep);
// Forgets committed steps > after: a restore to `after` abandons them, and a step saved again is
// not committed until every shard has written it again. No record is no error.
Status UncommitStepsAfter(const std::string& train_dir, int64_t after);

// The newest step every shard holds whole that is also committed; nullopt when there is none.
// `committed` nullopt (no record at all) accepts any step every shard holds: a train_dir from
// before commits, whose common step is still one step on every shard.
std::optional<int64_t> NewestRestorableStep(const std::vector<std::vector<int64_t>>& whole_by_shard,
                                            const std::optional<std::vector<int64_t>>& committed);

// On the wire (common/wire/message.h): every register reply lists in `steps` the steps the
// shard holds whole, oldest first; the chief's kRestore with `step` S restores every shard of S
// (reply kOk with text "restored", or kError naming the file).

}  // namespace pstrain
