#include "common/checkpoint/checkpoint_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/checkpoint_index.h"
#include "common/checkpoint/tf_checkpoint.h"

namespace pstrain {
namespace {

constexpr char kIndexName[] = "checkpoint";

bool IsAbsolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// NotFound when the directory has no index yet.
Result<CheckpointState> ReadState(const std::string& index_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  return ParseCheckpointState(text, index_path);
}

}  // namespace

CheckpointManager::CheckpointManager(std::string train_dir, int max_to_keep, std::string basename)
    : train_dir_(std::move(train_dir)), max_to_keep_(max_to_keep), basename_(std::move(basename)) {
  while (train_dir_.size() > 1 && train_dir_.back() == '/') train_dir_.pop_back();
  if (train_dir_.empty()) train_dir_ = ".";
}

std::string CheckpointManager::index_path() const { return Join(kIndexName); }

std::string CheckpointManager::Join(const std::string& name) const {
  if (IsAbsolute(name)) return name;
  return train_dir_ == "/" ? "/" + name : train_dir_ + "/" + name;
}

Result<std::string> CheckpointManager::Save(const CheckpointData& data) {
  auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(train_dir_, ec);
  if (ec) return Unavailable("cannot create train_dir '" + train_dir_ + "': " + ec.message());
  const std::string name = basename_ + "-" + std::to_string(data.global_step);
  const std::string path = Join(name);
  RETURN_IF_ERROR(WriteCheckpoint(path, data));

  CheckpointState state;
  Result<CheckpointState> old = ReadState(index_path());
  if (old.ok()) {
    state = std::move(old.value());
  } else if (old.status().code() != StatusCode::kNotFound) {
    // Losing track of old files is better than refusing to save: the index is rewritten.
    LOG(WARNING) << "rewriting unreadable checkpoint index: " << old.status().ToString();
  }
  std::vector<std::string>& all = state.all_model_checkpoint_paths;
  all.erase(std::remove(all.begin(), all.end(), name), all.end());
  all.push_back(name);
  state.model_checkpoint_path = name;
  std::vector<std::string> expired;
  if (max_to_keep_ > 0 && all.size() > static_cast<size_t>(max_to_keep_)) {
    size_t drop = all.size() - static_cast<size_t>(max_to_keep_);
    expired.assign(all.begin(), all.begin() + drop);
    all.erase(all.begin(), all.begin() + drop);
  }
  // The index changes before any file goes, so it never lists a deleted checkpoint.
  RETURN_IF_ERROR(WriteFileAtomically(index_path(), FormatCheckpointState(state)));
  for (const std::string& old_name : expired) {
    // Only files this directory owns; an absolute entry may belong to another run.
    if (IsAbsolute(old_name)) continue;
    if (unlink(Join(old_name).c_str()) != 0 && errno != ENOENT) {
      LOG(WARNING) << "cannot delete old checkpoint '" << Join(old_name)
                   << "': " << std::strerror(errno);
    }
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  LOG(INFO) << "Saved checkpoint " << path << " (" << data.tensors.size() << " tensors) in " << ms
            << " ms";
  return path;
}

Result<std::string> CheckpointManager::LatestPath() const {
  Result<CheckpointState> state = ReadState(index_path());
  if (!state.ok()) {
    if (state.status().code() == StatusCode::kNotFound) {
      return NotFound("no checkpoint in '" + train_dir_ + "' (no index file '" + index_path() +
                      "')");
    }
    return state.status();
  }
  return Join(state->model_checkpoint_path);
}

Result<std::vector<std::string>> CheckpointManager::AllPaths() const {
  Result<CheckpointState> state = ReadState(index_path());
  if (!state.ok()) {
    if (state.status().code() == StatusCode::kNotFound) return std::vector<std::string>();
    return state.status();
  }
  std::vector<std::string> paths;
  for (const std::string& p : state->all_model_checkpoint_paths) paths.push_back(Join(p));
  return paths;
}

Result<std::string> CheckpointManager::PathFromLatest(int back) const {
  ASSIGN_OR_RETURN(std::vector<std::string> paths, AllPaths());
  if (back < 0 || static_cast<size_t>(back) >= paths.size()) {
    return OutOfRange("asked for the checkpoint " + std::to_string(back) +
                      " before the latest, but '" + index_path() + "' lists " +
                      std::to_string(paths.size()));
  }
  return paths[paths.size() - 1 - static_cast<size_t>(back)];
}

Result<std::string> CheckpointManager::ResolvePath(const std::string& name_or_path) const {
  if (name_or_path.empty()) return InvalidArgument("empty checkpoint path");
  std::string path =
      name_or_path.find('/') == std::string::npos ? Join(name_or_path) : name_or_path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return CheckpointManager(path, 0, basename_).LatestPath();
  }
  return path;
}

Result<CheckpointData> CheckpointManager::RestoreLatest() const {
  ASSIGN_OR_RETURN(std::string latest, LatestPath());
  ASSIGN_OR_RETURN(std::vector<std::string> listed, AllPaths());
  // The index's latest first (it is also the last listed unless the file was edited by hand).
  std::vector<std::string> candidates = {latest};
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
    if (*it != latest) candidates.push_back(*it);
  }
  Status newest_error;
  for (const std::string& path : candidates) {
    Result<CheckpointData> data = ReadCheckpointOrTfBundle(path, tf_layout_);
    if (data.ok()) return data;
    const Status& st = data.status();
    if (st.code() != StatusCode::kDataLoss && st.code() != StatusCode::kNotFound) return st;
    LOG(WARNING) << "skipping checkpoint " << path << " listed in " << index_path() << ": "
                 << st.message() << "; trying the one before it";
    if (newest_error.ok()) newest_error = st;
  }
  return Status(newest_error.code(),
                newest_error.message() + "; none of the " + std::to_string(candidates.size()) +
                    " checkpoints listed in '" + index_path() + "' reads back whole");
}

Status CheckpointManager::RemoveFromIndex(const std::vector<std::string>& paths) const {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path()));
  ASSIGN_OR_RETURN(CheckpointState state, ParseCheckpointState(text, index_path()));
  auto removed = [&](const std::string& name) {
    return std::find(paths.begin(), paths.end(), Join(name)) != paths.end();
  };
  std::vector<std::string>& all = state.all_model_checkpoint_paths;
  all.erase(std::remove_if(all.begin(), all.end(), removed), all.end());
  if (all.empty()) {
    if (unlink(index_path().c_str()) != 0 && errno != ENOENT) {
      return Unavailable("cannot remove '" + index_path() + "': " + std::strerror(errno));
    }
    return Status::OK();
  }
  if (removed(state.model_checkpoint_path)) state.model_checkpoint_path = all.back();
  return WriteFileAtomically(index_path(), FormatCheckpointState(state));
}

Result<CheckpointData> CheckpointManager::Restore(const std::string& name_or_path) const {
  ASSIGN_OR_RETURN(std::string path, ResolvePath(name_or_path));
  return ReadCheckpointOrTfBundle(path, tf_layout_);
}

}  // namespace pstrain
