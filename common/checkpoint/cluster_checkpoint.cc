#include "common/checkpoint/cluster_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/checkpoint_index.h"

namespace pstrain {
namespace {

constexpr char kCommitRecordName[] = "committed_checkpoints";
constexpr char kPrefix[] = "model.ckpt-";
// What the record holds once every step has been taken out: TF's format has no empty state.
constexpr char kNothingCommitted[] = "# no step is committed\n";

Status WriteSteps(const std::string& train_dir, const std::vector<int64_t>& steps) {
  if (steps.empty()) return WriteFileAtomically(CommitRecordPath(train_dir), kNothingCommitted);
  CheckpointState state;
  for (int64_t step : steps) state.all_model_checkpoint_paths.push_back(CheckpointName(step));
  state.model_checkpoint_path = state.all_model_checkpoint_paths.back();
  return WriteFileAtomically(CommitRecordPath(train_dir), FormatCheckpointState(state));
}

bool OnlyComments(const std::string& text) {
  bool comment = false;
  for (char c : text) {
    if (c == '\n') {
      comment = false;
    } else if (c == '#') {
      comment = true;
    } else if (!comment && !std::isspace(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ShardDirectory(const std::string& train_dir, int task, int num_ps) {
  return train_dir + "/ps-" + std::to_string(task) + "-of-" + std::to_string(num_ps);
}

std::string CheckpointName(int64_t step) { return kPrefix + std::to_string(step); }

std::optional<int64_t> StepOfCheckpoint(const std::string& name_or_path) {
  const size_t slash = name_or_path.rfind('/');
  const std::string name =
      slash == std::string::npos ? name_or_path : name_or_path.substr(slash + 1);
  const size_t n = sizeof(kPrefix) - 1;
  if (name.size() <= n || name.compare(0, n, kPrefix) != 0 || name.size() - n > 18) {
    return std::nullopt;
  }
  int64_t step = 0;
  for (size_t i = n; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string CommitRecordPath(const std::string& train_dir) {
  return train_dir + "/" + kCommitRecordName;
}

Result<std::vector<int64_t>> ReadCommittedSteps(const std::string& train_dir) {
  const std::string path = CommitRecordPath(train_dir);
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  if (OnlyComments(text)) return std::vector<int64_t>();
  ASSIGN_OR_RETURN(CheckpointState state, ParseCheckpointState(text, path));
  std::vector<int64_t> steps;
  for (const std::string& name : state.all_model_checkpoint_paths) {
    std::optional<int64_t> step = StepOfCheckpoint(name);
    if (!step) {
      return DataLoss(path + ": '" + name + "' is not a checkpoint name (model.ckpt-<step>)");
    }
    steps.push_back(*step);
  }
  return steps;
}

Status CommitStep(const std::string& train_dir, int64_t step, int keep) {
  Result<std::vector<int64_t>> old = ReadCommittedSteps(train_dir);
  std::vector<int64_t> steps;
  if (old.ok()) {
    steps = std::move(old).value();
  } else if (old.status().code() != StatusCode::kNotFound) {
    // Forgetting older commits is better than refusing this one: the record is rewritten.
    LOG(WARNING) << "rewriting the unreadable commit record: " << old.status().ToString();
  }
  steps.erase(std::remove(steps.begin(), steps.end(), step), steps.end());
  steps.push_back(step);
  if (keep > 0 && steps.size() > static_cast<size_t>(keep)) {
    steps.erase(steps.begin(), steps.end() - keep);
  }
  return WriteSteps(train_dir, steps);
}

Status UncommitStepsAfter(const std::string& train_dir, int64_t after) {
  Result<std::vector<int64_t>> old = ReadCommittedSteps(train_dir);
  if (!old.ok() && old.status().code() == StatusCode::kNotFound) return Status::OK();
  std::vector<int64_t> steps;
  if (old.ok()) steps = std::move(old).value();  // an unreadable record is rewritten
  const size_t before = steps.size();
  steps.erase(std::remove_if(steps.begin(), steps.end(), [&](int64_t s) { return s > after; }),
              steps.end());
  if (old.ok() && steps.size() == before) return Status::OK();
  return WriteSteps(train_dir, steps);
}

std::optional<int64_t> NewestRestorableStep(const std::vector<std::vector<int64_t>>& whole_by_shard,
                                            const std::optional<std::vector<int64_t>>& committed) {
  if (whole_by_shard.empty()) return std::nullopt;
  std::set<int64_t> common(whole_by_shard[0].begin(), whole_by_shard[0].end());
  for (size_t k = 1; k < whole_by_shard.size(); ++k) {
    std::set<int64_t> both;
    for (int64_t s : whole_by_shard[k]) {
      if (common.count(s)) both.insert(s);
    }
    common = std::move(both);
  }
  for (auto it = common.rbegin(); it != common.rend(); ++it) {
    if (!committed || std::count(committed->begin(), committed->end(), *it)) return *it;
  }
  return std::nullopt;
}

}  // namespace pstrain
