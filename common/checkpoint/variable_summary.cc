#include "common/checkpoint/variable_summary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"

namespace pstrain {

namespace fs = std::filesystem;

namespace {

// The checkpoint files `path` stands for: itself, its index's latest, or one per shard of a
// cluster's train_dir at the step a restart would restore.
Result<std::vector<std::string>> FilesOf(const std::string& path) {
  if (fs::is_regular_file(path)) return std::vector<std::string>{path};
  if (!fs::is_directory(path)) return NotFound(path + ": no such file or directory");
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
    return NotFound(path + " holds no checkpoint: no `checkpoint` index and no ps-<k>-of-<n> "
                           "shard directories");
  }
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
      steps, committed.ok() ? std::optional<std::vector<int64_t>>(committed.value())
                            : std::nullopt);
  if (!step) return NotFound(path + ": no step that every one of its shards holds");
  std::vector<std::string> files;
  for (const std::string& shard : shards) files.push_back(shard + "/" + CheckpointName(*step));
  return files;
}

// "w/part_3" -> ("w", 3); false for a name that is no part.
bool PartOf(const std::string& key, std::string* variable, int* part) {
  const size_t at = key.rfind("/part_");
  if (at == std::string::npos || at + 6 == key.size() ||
      key.find_first_not_of("0123456789", at + 6) != std::string::npos) {
    return false;
  }
  *variable = key.substr(0, at);
  *part = std::stoi(key.substr(at + 6));
  return true;
}

}  // namespace

Result<VariableSummary> SummarizeVariable(const std::string& path, const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, FilesOf(path));
  VariableSummary s;
  s.name = name;
  std::map<int, Tensor> parts;  // by part index; a whole variable is part -1
  std::vector<std::string> names;
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(CheckpointData data, ReadCheckpoint(file));
    s.global_step = data.global_step;
    for (const auto& [key, tensor] : data.tensors) {
      std::string variable;
      int part = -1;
      const bool is_part = PartOf(key, &variable, &part);
      names.push_back(key);
      if (key == name || (is_part && variable == name)) {
        parts[is_part ? part : -1] = tensor;
        s.files.push_back(file);
      }
    }
  }
  if (parts.empty()) {
    std::sort(names.begin(), names.end());
    std::string known;
    for (size_t i = 0; i < names.size() && i < 40; ++i) known += (i ? ", " : "") + names[i];
    return NotFound("no variable '" + name + "' in " + path + " (it holds " +
                    std::to_string(names.size()) + " tensors: " + known +
                    (names.size() > 40 ? ", ..." : "") + ")");
  }
  if (parts.size() == 1) {
    s.value = parts.begin()->second;
  } else {  // rows split across servers, in part order
    std::vector<int64_t> dims = parts.begin()->second.shape().dims();
    int64_t rows = 0;
    for (const auto& [i, t] : parts) rows += t.shape().dims().empty() ? 1 : t.shape().dims()[0];
    if (!dims.empty()) dims[0] = rows;
    s.value = Tensor(Shape(dims));
    int64_t at = 0;
    for (const auto& [i, t] : parts) {
      std::memcpy(s.value.data() + at, t.data(), t.bytes());
      at += t.size();
    }
  }
  double sum = 0, sum_sq = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < s.value.size(); ++i) {
    const float v = s.value[i];
    if (std::isnan(v)) {
      ++s.nan_count;
      continue;
    }
    if (std::isinf(v)) {
      ++s.inf_count;
      continue;
    }
    s.zero_count += v == 0.0f;
    s.min = finite == 0 ? v : std::min<double>(s.min, v);
    s.max = finite == 0 ? v : std::max<double>(s.max, v);
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    ++finite;
  }
  if (finite > 0) {
    s.mean = sum / finite;
    s.stddev = std::sqrt(std::max(0.0, sum_sq / finite - s.mean * s.mean));
  }
  return s;
}

std::string FormatVariableSummary(const VariableSummary& s, int max_values) {
  std::ostringstream out;
  out << s.name << ": float32 " << s.value.shape().ToString() << ", " << s.value.size()
      << " values, global step " << s.global_step << "\n";
  for (const std::string& f : s.files) out << "  from " << f << "\n";
  out << "  min " << s.min << "  max " << s.max << "  mean " << s.mean << "  stddev " << s.stddev
      << "\n  NaN " << s.nan_count << "  Inf " << s.inf_count << "  zeros " << s.zero_count << "\n";
  out << "  values:";
  const int64_t n = s.value.size();
  const int64_t half = std::max(1, max_values / 2);
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * half && i == half) {
      out << " ... (" << n - 2 * half << " more)";
      i = n - half;
    }
    out << " " << s.value[i];
  }
  out << "\n";
  return out.str();
}

}  // namespace pstrain
