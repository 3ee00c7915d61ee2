// The whole model's state that a checkpoint path stands for, read as one CheckpointData, for
// tools that look at a model rather than a file (pstrain-checkpoint print, to_tf):
//   a checkpoint file, or a TensorFlow bundle's prefix      itself
//   a directory with a `checkpoint` index                    its latest checkpoint
//   a cluster's train_dir (ps-<k>-of-<n> shard directories)  every shard at the step a restart
//        would restore: the newest committed step every shard holds (cluster_checkpoint.h), so
//        nothing is read that the chief did not commit; a variable split across servers
//        ("<name>/part_<i>", its slots "<name>/part_<i>/<slot>") is joined back along its rows
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/status.h"

namespace pstrain {

struct JoinedCheckpoint {
  CheckpointData data;
  // For each tensor of `data`, the files its parts came from.
  std::map<std::string, std::vector<std::string>> files;
};

// NotFound when `path` holds no checkpoint (or no step every shard holds); DataLoss naming the
// file when one is damaged; InvalidArgument naming a split variable whose parts do not fit.
Result<JoinedCheckpoint> ReadJoinedCheckpoint(const std::string& path);

// Joins in place every variable of `data` split across servers ("<name>/part_<i>" and its slots)
// back into "<name>" along its rows, as ReadJoinedCheckpoint does: for restoring a checkpoint a
// parameter server wrote into a whole model. InvalidArgument naming a variable whose parts do not
// fit; `data` is unchanged then.
Status JoinSplitVariables(CheckpointData* data);

}  // namespace pstrain
