// One server's checkpoints of its shard (<train_dir>/ps-<k>-of-<n>, TF-style index and files,
// common/checkpoint/checkpoint_manager.h): which steps it holds whole, reading one back, and
// writing new ones on a background thread so that the server goes on answering heartbeats, pulls
// and pushes while a large shard is written and fsync'd.
//
// A save is given a snapshot: Tensor handles of the store's state, not copies. An update while a
// snapshot still holds them writes the variable's new value to another buffer and copies its
// slots first (VariableStore::Holders::kKeepTheirBytes), so the file holds the state at the
// request, and only what changes during the write is ever copied. Snapshots come back to the
// serving thread with their results and are released there, so that the store's check for other
// holders is ordered with the writer's last read.
//
// Which step to restore is not decided here: the chief picks the newest committed step every
// shard holds whole (common/checkpoint/cluster_checkpoint.h) and asks each server for it. A file
// that does not read back whole (a torn write, a bad disk) is set aside as "<file>.damaged",
// taken out of the index and logged naming it and why, so that it is skipped from then on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/checkpoint/checkpoint.h"
#include "common/status.h"

namespace pstrain {
namespace ps {

class ShardCheckpoints {
 public:
  // `who` prefixes the log lines ("ps 1"). `before_write`, if set, runs on the writer thread
  // before each file is written (tests use it to hold a save open).
  ShardCheckpoints(std::string dir, int max_to_keep, std::string who,
                   std::function<void(int64_t step)> before_write = nullptr);
  // Finishes the saves already queued (each file is whole or absent either way), then stops.
  ~ShardCheckpoints();
  ShardCheckpoints(const ShardCheckpoints&) = delete;
  ShardCheckpoints& operator=(const ShardCheckpoints&) = delete;

  // Steps whose files read back whole, oldest first. The first call reads every file the index
  // lists, setting aside those that do not read back; later calls answer from what it found and
  // from the saves since.
  std::vector<int64_t> WholeSteps();
  // The file of `step`; one that does not read back whole is set aside and its error returned.
  Result<CheckpointData> Read(int64_t step);
  // The newest whole checkpoint at or before `step` (damaged ones set aside on the way), or
  // NotFound.
  Result<CheckpointData> ReadNewestAtOrBefore(int64_t step);
  // After the cluster restored `step`: files of later steps belong to a run it abandoned; they
  // leave the index and the disk, so they cannot be mistaken for a later save of the same step.
  void ForgetAfter(int64_t step);

  // Queues `data` (a snapshot) for the writer thread; returns a ticket TakeFinished gives back.
  uint64_t StartSave(CheckpointData data);
  struct Finished {
    uint64_t ticket = 0;
    int64_t step = 0;
    Result<std::string> path = std::string();  // the file written, once durable
    CheckpointData snapshot;                   // released by the caller
  };
  // Saves finished since the last call, oldest first; with `wait`, first waits until every
  // queued save has finished.
  std::vector<Finished> TakeFinished(bool wait);
  // Whether a save is queued or being written.
  bool busy();

  const std::string& dir() const { return dir_; }

 private:
  void WriterLoop();
  void ScanLocked();  // index_mu_ held
  // Moves `path` aside as damaged and out of the index. index_mu_ held.
  void SetAsideLocked(const std::string& path, const Status& why);

  const std::string dir_;
  const int max_to_keep_;
  const std::string who_;
  const std::function<void(int64_t)> before_write_;

  // Serialises everything that reads or rewrites the index and the files.
  std::mutex index_mu_;
  bool scanned_ = false;  // index_mu_

  std::mutex mu_;  // the rest
  std::condition_variable cv_;
  std::set<int64_t> whole_;
  struct Queued {
    uint64_t ticket;
    CheckpointData data;
  };
  std::deque<Queued> queue_;
  bool writing_ = false;
  bool stop_ = false;
  uint64_t next_ticket_ = 1;
  std::vector<Finished> finished_;
  std::thread writer_;
};

}  // namespace ps
}  // namespace pstrain
