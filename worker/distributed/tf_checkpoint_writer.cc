#include "worker/distributed/tf_checkpoint_writer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/joined_checkpoint.h"
#include "common/checkpoint/tf_checkpoint_dir.h"

namespace pstrain::worker {

namespace {

std::mutex chief_mu;
std::unique_ptr<TfCheckpointWriter>& ChiefWriter() {
  static auto* writer = new std::unique_ptr<TfCheckpointWriter>();
  return *writer;
}

}  // namespace

std::string TfCheckpointDirectory(const std::string& train_dir) { return train_dir + "/tf"; }

Result<std::string> TfCheckpointWriter::Write(const std::string& train_dir, int64_t step) const {
  Result<JoinedCheckpoint> joined = ReadJoinedCheckpoint(train_dir);
  if (!joined.ok() && joined.status().code() == StatusCode::kNotFound) {
    return FailedPrecondition(joined.status().message());
  }
  if (!joined.ok()) return joined.status();
  if (joined->data.global_step != step) {
    return FailedPrecondition(train_dir + ": the newest step every shard under it holds is " +
                              std::to_string(joined->data.global_step) + ", not committed step " +
                              std::to_string(step));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> committed, ReadCommittedSteps(train_dir));
  TfCheckpointDirOptions dir_options;
  dir_options.bundle = options_.bundle;
  dir_options.max_to_keep = options_.max_to_keep;
  // A restore to an older step uncommits the newer ones; their bundles go with them.
  dir_options.keep_step = [&committed](int64_t s) {
    return std::find(committed.begin(), committed.end(), s) != committed.end();
  };
  return SaveTfCheckpointInDir(TfCheckpointDirectory(train_dir), joined->data, dir_options);
}

void TfCheckpointWriter::WriteOrWarn(const std::string& train_dir, int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> prefix = Write(train_dir, step);
  if (prefix.ok()) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    LOG(INFO) << "chief: wrote TensorFlow checkpoint " << *prefix << " of committed step " << step
              << " in " << ms << " ms";
    return;
  }
  const bool elsewhere = prefix.status().code() == StatusCode::kFailedPrecondition;
  if (elsewhere && said_shards_elsewhere_) return;
  said_shards_elsewhere_ |= elsewhere;
  LOG(WARNING) << "chief: --tf_checkpoints: no TensorFlow checkpoint "
               << TfCheckpointDirectory(train_dir) << "/" << CheckpointName(step) << ": "
               << prefix.status().ToString()
               << (elsewhere ? " (the servers' shards are not all readable from the chief's "
                               "train_dir; run pstrain-checkpoint to_tf where they are)"
                             : "; training goes on");
}

void SetChiefTfCheckpointWriter(std::unique_ptr<TfCheckpointWriter> writer) {
  std::lock_guard<std::mutex> lock(chief_mu);
  ChiefWriter() = std::move(writer);
}

void AfterCheckpointCommitted(const std::string& train_dir, int64_t step) {
  std::lock_guard<std::mutex> lock(chief_mu);
  if (ChiefWriter()) ChiefWriter()->WriteOrWarn(train_dir, step);
}

}  // namespace pstrain::worker
