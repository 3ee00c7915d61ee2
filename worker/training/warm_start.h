// Warm start (TensorFlow's warm_start_from, the start of a fine-tuning): a model's variables
// take their values from a checkpoint before training, except those `--restore_exclude` names;
// the global step and the optimizer's slots start fresh. The checkpoint is a file, or a
// directory whose latest checkpoint is taken (its `checkpoint` index; an older valid one if the
// latest is damaged). A variable of another shape is an error naming both; variables the
// checkpoint lacks keep their initial values, said in the report. A TensorFlow checkpoint (a
// bundle's prefix, or a TF train_dir; tf_checkpoint.h maps its names and layouts) must hold every
// variable not excluded: a missing name is an error naming it and the names the bundle holds.
#pragma once

#include <string>
#include <vector>

#include "common/checkpoint/partial_restore.h"
#include "common/checkpoint/tf_checkpoint.h"
#include "common/status.h"
#include "worker/network/model.h"

namespace pstrain {
namespace worker {

// "a,b/*" -> {"a", "b/*"} (empty items dropped): --restore_exclude's list.
std::vector<std::string> SplitList(const std::string& s);

// The model's variables from `checkpoint` (a file or a train_dir), except `exclude`'s
// (RestoreFilter's prefixes and globs).
Result<RestoreReport> WarmStart(const std::string& checkpoint,
                                const std::vector<std::string>& exclude, Model* model,
                                const TfLayout& layout = {});

// "warm start from PATH: N variables (M left at their initial values by --restore_exclude...)".
std::string DescribeWarmStart(const std::string& checkpoint, const RestoreReport& report);

}  // namespace worker
}  // namespace pstrain
