#include "common/checkpoint/tf_checkpoint_dir.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/checkpoint_index.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/tf_bundle.h"

namespace pstrain {

namespace fs = std::filesystem;

namespace {

// The state file in `dir`, empty when there is none; an error when it lists a non-bundle.
Result<CheckpointState> ReadTfState(const std::string& dir) {
  const std::string path = (fs::path(dir) / "checkpoint").string();
  if (!fs::exists(path)) return CheckpointState{};
  ASSIGN_OR_RETURN(std::vector<std::string> listed, CheckpointManager(dir, 0).AllPaths());
  for (const std::string& p : listed) {
    if (!IsTfBundle(p)) {
      return InvalidArgument(path + " lists " + p +
                             ", which is no TensorFlow checkpoint: write TensorFlow checkpoints "
                             "into a directory of their own, not a pstrain train_dir");
    }
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseCheckpointState(text, path);
}

// Deletes the bundle at `prefix` (its index first, so a reader never finds an index without data).
void RemoveBundle(const std::string& prefix) {
  std::error_code ec;
  fs::remove(BundleIndexPath(prefix), ec);
  const fs::path p(prefix);
  const std::string data_prefix = p.filename().string() + ".data-";
  for (const auto& entry : fs::directory_iterator(p.parent_path(), ec)) {
    if (entry.path().filename().string().rfind(data_prefix, 0) == 0) fs::remove(entry.path(), ec);
  }
}

std::string InDir(const std::string& dir, const std::string& name) {
  return fs::path(name).is_absolute() ? name : (fs::path(dir) / name).string();
}

}  // namespace

Result<std::string> SaveTfCheckpointInDir(const std::string& dir, const CheckpointData& data,
                                          const TfCheckpointDirOptions& options) {
  ASSIGN_OR_RETURN(CheckpointState state, ReadTfState(dir));
  const std::string name = CheckpointName(data.global_step);
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string prefix = (fs::path(dir) / name).string();
  RETURN_IF_ERROR(WriteTfCheckpoint(prefix, data, options.bundle));

  std::vector<std::string> kept, dropped;
  for (const std::string& listed : state.all_model_checkpoint_paths) {
    if (listed == name) continue;
    const std::optional<int64_t> step = StepOfCheckpoint(listed);
    if (options.keep_step && step && !options.keep_step(*step)) {
      dropped.push_back(listed);
    } else {
      kept.push_back(listed);
    }
  }
  kept.push_back(name);
  if (options.max_to_keep > 0 && kept.size() > static_cast<size_t>(options.max_to_keep)) {
    const auto first_kept = kept.end() - options.max_to_keep;
    dropped.insert(dropped.end(), kept.begin(), first_kept);
    kept.erase(kept.begin(), first_kept);
  }
  state.all_model_checkpoint_paths = kept;
  state.model_checkpoint_path = name;
  RETURN_IF_ERROR(
      WriteFileAtomically((fs::path(dir) / "checkpoint").string(), FormatCheckpointState(state)));
  for (const std::string& old : dropped) RemoveBundle(InDir(dir, old));
  return prefix;
}

}  // namespace pstrain
