#include "common/checkpoint/joined_checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/tf_checkpoint.h"

namespace pstrain {

namespace fs = std::filesystem;

namespace {

// NotFound naming the first ps-<k>-of-<n> directory missing beside `shards` (a server that keeps
// its shard on another host's disk): a model joined without it would lack its variables.
Status CheckEveryShardIsHere(const std::string& path, const std::vector<std::string>& shards) {
  std::set<std::string> names;
  for (const std::string& shard : shards) names.insert(fs::path(shard).filename().string());
  for (const std::string& name : names) {
    const size_t of = name.find("-of-");
    if (of == std::string::npos) continue;
    const int n = std::atoi(name.c_str() + of + 4);
    for (int k = 0; k < n; ++k) {
      const std::string want = "ps-" + std::to_string(k) + "-of-" + std::to_string(n);
      if (names.count(want) == 0) {
        return NotFound(path + " holds " + name + " but not " + want +
                        ": every server's shard directory must be under it");
      }
    }
  }
  return Status::OK();
}

// The checkpoint files `path` stands for: itself, its index's latest, or one per shard of a
// cluster's train_dir at the step a restart would restore.
Result<std::vector<std::string>> FilesOf(const std::string& path) {
  if (fs::is_regular_file(path) || !fs::is_directory(path)) return std::vector<std::string>{path};
  if (fs::exists(fs::path(path) / "checkpoint")) {
    ASSIGN_OR_RETURN(std::string latest, CheckpointManager(path, 0).LatestPath());
    return std::vector<std::string>{latest};
  }
  std::vector<std::string> shards;
  for (const auto& entry : fs::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("ps-", 0) == 0) shards.push_back(entry.path());
  }
  std::sort(shards.begin(), shards.end());
  if (shards.empty()) {
    return NotFound(path +
                    " holds no checkpoint: no `checkpoint` index and no ps-<k>-of-<n> "
                    "shard directories");
  }
  RETURN_IF_ERROR(CheckEveryShardIsHere(path, shards));
  std::vector<std::vector<int64_t>> steps;
  for (const std::string& shard : shards) {
    std::vector<int64_t> held;
    auto paths = CheckpointManager(shard, 0).AllPaths();
    if (paths.ok()) {
      for (const std::string& p : paths.value()) {
        if (auto step = StepOfCheckpoint(p)) held.push_back(*step);
      }
    }
    std::sort(held.begin(), held.end());
    steps.push_back(held);
  }
  Result<std::vector<int64_t>> committed = ReadCommittedSteps(path);
  std::optional<int64_t> step = NewestRestorableStep(
      steps,
      committed.ok() ? std::optional<std::vector<int64_t>>(committed.value()) : std::nullopt);
  if (!step) return NotFound(path + ": no committed step that every one of its shards holds");
  std::vector<std::string> files;
  for (const std::string& shard : shards) files.push_back(shard + "/" + CheckpointName(*step));
  return files;
}

// "w/part_3" -> ("w", 3); "w/part_3/m" (a slot of the part) -> ("w/m", 3); false otherwise.
bool PartOf(const std::string& key, std::string* whole, int* part) {
  for (size_t at = key.rfind("/part_"); at != std::string::npos;
       at = at == 0 ? std::string::npos : key.rfind("/part_", at - 1)) {
    const size_t digits = at + 6;
    const size_t end = std::min(key.find('/', digits), key.size());
    if (end == digits || key.find_first_not_of("0123456789", digits) < end) continue;
    *whole = key.substr(0, at) + key.substr(end);
    *part = std::stoi(key.substr(digits, end - digits));
    return true;
  }
  return false;
}

// The parts of one tensor, in part order, stacked along dimension 0.
Result<Tensor> Join(const std::string& name, const std::map<int, Tensor>& parts) {
  if (parts.size() == 1) return parts.begin()->second;
  std::vector<int64_t> dims = parts.begin()->second.shape().dims();
  if (dims.empty()) return InvalidArgument("split variable '" + name + "' has scalar parts");
  int64_t rows = 0;
  for (const auto& [i, t] : parts) {
    std::vector<int64_t> d = t.shape().dims();
    if (d.size() != dims.size() || !std::equal(d.begin() + 1, d.end(), dims.begin() + 1)) {
      return InvalidArgument("split variable '" + name + "': part " + std::to_string(i) +
                             " has shape " + t.shape().ToString() + ", unlike part " +
                             std::to_string(parts.begin()->first) + "'s " +
                             parts.begin()->second.shape().ToString());
    }
    rows += d[0];
  }
  dims[0] = rows;
  Tensor whole = Tensor::Uninitialized(Shape(dims));
  int64_t at = 0;
  for (const auto& [i, t] : parts) {
    std::memcpy(whole.data() + at, t.data(), t.bytes());
    at += t.size();
  }
  return whole;
}

}  // namespace

Result<JoinedCheckpoint> ReadJoinedCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, FilesOf(path));
  JoinedCheckpoint out;
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(CheckpointData data, ReadCheckpointOrTfBundle(file));
    out.data.global_step = data.global_step;
    for (const auto& [k, v] : data.metadata) out.data.metadata.emplace(k, v);
    for (auto& [key, tensor] : data.tensors) {
      std::string whole = key;
      int part = -1;
      PartOf(key, &whole, &part);
      out.files[whole].push_back(file);
      out.data.tensors[key] = std::move(tensor);
    }
  }
  RETURN_IF_ERROR(JoinSplitVariables(&out.data));
  return out;
}

Status JoinSplitVariables(CheckpointData* data) {
  // Tensor copies share their buffers: nothing is copied until Join stacks the parts.
  std::map<std::string, std::map<int, Tensor>> split;
  std::vector<std::string> part_keys;
  for (const auto& [key, tensor] : data->tensors) {
    std::string whole = key;
    int part = -1;
    if (!PartOf(key, &whole, &part)) continue;
    split[whole][part] = tensor;
    part_keys.push_back(key);
  }
  std::map<std::string, Tensor> joined;
  for (const auto& [name, pieces] : split) {
    if (data->tensors.count(name)) {
      return InvalidArgument("split variable '" + name + "' is held whole too");
    }
    ASSIGN_OR_RETURN(joined[name], Join(name, pieces));
  }
  for (const std::string& key : part_keys) data->tensors.erase(key);
  for (auto& [name, tensor] : joined) data->tensors[name] = std::move(tensor);
  return Status::OK();
}

}  // namespace pstrain
