// The `checkpoint` index file that sits beside the checkpoints, in TensorFlow's CheckpointState
// text format, so TF users' tools and habits carry over:
//   model_checkpoint_path: "model.ckpt-300"
//   all_model_checkpoint_paths: "model.ckpt-200"
//   all_model_checkpoint_paths: "model.ckpt-300"
// Paths are relative to the index's directory unless absolute. Reading also accepts the
// fields newer TF versions add (all_model_checkpoint_timestamps, last_preserved_timestamp).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

struct CheckpointState {
  std::string model_checkpoint_path;                    // the latest
  std::vector<std::string> all_model_checkpoint_paths;  // oldest first, latest last
};

// Protobuf text format, one field per line, strings C-escaped as protobuf does.
std::string FormatCheckpointState(const CheckpointState& state);

// DataLoss naming `source` (the file) and the line when `text` is not a CheckpointState.
Result<CheckpointState> ParseCheckpointState(const std::string& text, const std::string& source);

}  // namespace pstrain
