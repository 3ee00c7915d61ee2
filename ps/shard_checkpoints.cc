#include "ps/shard_checkpoints.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"

namespace pstrain {
namespace ps {

ShardCheckpoints::ShardCheckpoints(std::string dir, int max_to_keep, std::string who,
                                   std::function<void(int64_t)> before_write)
    : dir_(std::move(dir)),
      max_to_keep_(max_to_keep),
      who_(std::move(who)),
      before_write_(std::move(before_write)) {
  writer_ = std::thread([this] { WriterLoop(); });
}

ShardCheckpoints::~ShardCheckpoints() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

void ShardCheckpoints::SetAsideLocked(const std::string& path, const Status& why) {
  const std::string aside = path + ".damaged";
  std::string moved = "set aside as " + aside;
  if (std::rename(path.c_str(), aside.c_str()) != 0) {
    moved =
        errno == ENOENT ? "it is missing" : "cannot set it aside: " + std::string(strerror(errno));
  }
  CheckpointManager manager(dir_, max_to_keep_);
  Status s = manager.RemoveFromIndex({path});
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    LOG(WARNING) << who_ << ": cannot take " << path << " out of the index: " << s.ToString();
  }
  if (std::optional<int64_t> step = StepOfCheckpoint(path)) {
    std::lock_guard<std::mutex> lock(mu_);
    whole_.erase(*step);
  }
  LOG(WARNING) << who_ << ": skipping damaged checkpoint " << path << " (" << why.message() << "); "
               << moved << " and taken out of " << manager.index_path();
}

void ShardCheckpoints::ScanLocked() {
  scanned_ = true;
  CheckpointManager manager(dir_, max_to_keep_);
  Result<std::vector<std::string>> listed = manager.AllPaths();
  if (!listed.ok()) {
    LOG(WARNING) << who_ << ": cannot read the index of its checkpoints ("
                 << listed.status().ToString() << "); it holds none it can restore";
    return;
  }
  for (const std::string& path : listed.value()) {
    std::optional<int64_t> step = StepOfCheckpoint(path);
    if (!step) {
      LOG(WARNING) << who_ << ": " << manager.index_path() << " lists '" << path
                   << "', which is not named model.ckpt-<step>; ignored";
      continue;
    }
    Result<CheckpointData> data = ReadCheckpoint(path);
    if (data.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      whole_.insert(*step);
    } else if (data.status().code() == StatusCode::kDataLoss ||
               data.status().code() == StatusCode::kNotFound) {
      SetAsideLocked(path, data.status());
    } else {
      LOG(WARNING) << who_ << ": cannot read " << path << " now (" << data.status().ToString()
                   << "); not offered for restore";
    }
  }
}

std::vector<int64_t> ShardCheckpoints::WholeSteps() {
  {
    std::lock_guard<std::mutex> index_lock(index_mu_);
    if (!scanned_) ScanLocked();
  }
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<int64_t>(whole_.begin(), whole_.end());
}

Result<CheckpointData> ShardCheckpoints::Read(int64_t step) {
  std::lock_guard<std::mutex> index_lock(index_mu_);
  const std::string path = dir_ + "/" + CheckpointName(step);
  Result<CheckpointData> data = ReadCheckpoint(path);
  if (!data.ok() && (data.status().code() == StatusCode::kDataLoss ||
                     data.status().code() == StatusCode::kNotFound)) {
    SetAsideLocked(path, data.status());
  }
  return data;
}

Result<CheckpointData> ShardCheckpoints::ReadNewestAtOrBefore(int64_t step) {
  std::vector<int64_t> steps = WholeSteps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it > step) continue;
    Result<CheckpointData> data = Read(*it);
    if (data.ok()) return data;
  }
  return NotFound(who_ + ": no whole checkpoint of step " + std::to_string(step) +
                  " or before in " + dir_);
}

void ShardCheckpoints::ForgetAfter(int64_t step) {
  std::lock_guard<std::mutex> index_lock(index_mu_);
  CheckpointManager manager(dir_, max_to_keep_);
  Result<std::vector<std::string>> listed = manager.AllPaths();
  if (!listed.ok()) return;
  std::vector<std::string> later;
  for (const std::string& path : listed.value()) {
    std::optional<int64_t> s = StepOfCheckpoint(path);
    if (s && *s > step) later.push_back(path);
  }
  if (later.empty()) return;
  Status s = manager.RemoveFromIndex(later);
  if (!s.ok()) {
    LOG(WARNING) << who_ << ": cannot forget the checkpoints after step " << step << ": "
                 << s.ToString();
    return;
  }
  std::string names;
  for (const std::string& path : later) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      LOG(WARNING) << who_ << ": cannot delete " << path << ": " << std::strerror(errno);
    }
    names += (names.empty() ? "" : ", ") + path;
    std::lock_guard<std::mutex> lock(mu_);
    whole_.erase(StepOfCheckpoint(path).value());
  }
  LOG(INFO) << who_ << ": deleted the checkpoints after the restored step " << step
            << " (the cluster went back past them): " << names;
}

uint64_t ShardCheckpoints::StartSave(CheckpointData data) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  queue_.push_back({ticket, std::move(data)});
  cv_.notify_all();
  return ticket;
}

bool ShardCheckpoints::busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return writing_ || !queue_.empty();
}

std::vector<ShardCheckpoints::Finished> ShardCheckpoints::TakeFinished(bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait) cv_.wait(lock, [&] { return !writing_ && queue_.empty(); });
  std::vector<Finished> out = std::move(finished_);
  finished_.clear();
  return out;
}

void ShardCheckpoints::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to write
    Queued job = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();

    Finished done;
    done.ticket = job.ticket;
    done.step = job.data.global_step;
    if (before_write_) before_write_(done.step);
    {
      std::lock_guard<std::mutex> index_lock(index_mu_);
      if (!scanned_) ScanLocked();
      CheckpointManager manager(dir_, max_to_keep_);
      done.path = manager.Save(job.data);
      // What the index still lists after the save (it deletes the oldest beyond max_to_keep).
      Result<std::vector<std::string>> listed = manager.AllPaths();
      std::lock_guard<std::mutex> state_lock(mu_);
      if (done.path.ok()) whole_.insert(done.step);
      if (listed.ok()) {
        std::set<int64_t> kept;
        for (const std::string& p : listed.value()) {
          if (std::optional<int64_t> s = StepOfCheckpoint(p)) kept.insert(*s);
        }
        for (auto it = whole_.begin(); it != whole_.end();) {
          it = kept.count(*it) ? std::next(it) : whole_.erase(it);
        }
      }
    }
    done.snapshot = std::move(job.data);

    lock.lock();
    finished_.push_back(std::move(done));
    writing_ = false;
    cv_.notify_all();
  }
}

}  // namespace ps
}  // namespace pstrain
