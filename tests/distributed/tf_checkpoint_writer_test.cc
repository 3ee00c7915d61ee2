// The chief's TensorFlow checkpoints (tf_checkpoint_writer.h) on shard files as servers write
// them: a committed step is joined and written under <train_dir>/tf; shards that are not all under
// the chief's train_dir, or a step that is not the committed one there, write nothing; a step
// the cluster went back behind leaves the list; a failed write is a warning, not a crash.
#include "worker/distributed/tf_checkpoint_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/checkpoint_index.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"
#include "common/checkpoint/tf_bundle.h"
#include "common/checkpoint/tf_checkpoint.h"

namespace pstrain::worker {
namespace {

namespace fs = std::filesystem;

class TfCheckpointWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tf_writer_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  // Shard `task` of 2 saves `step`: ps 0 holds the weights, ps 1 the bias.
  void Save(int task, int64_t step) {
    CheckpointData d;
    d.global_step = step;
    d.tensors[task == 0 ? "fc/weights" : "fc/bias"] =
        Tensor::Filled(task == 0 ? Shape{2, 3} : Shape{2}, static_cast<float>(step));
    ASSERT_TRUE(CheckpointManager(ShardDirectory(dir_, task, 2), 5).Save(d).ok());
  }
  void SaveAndCommit(int64_t step) {
    Save(0, step);
    Save(1, step);
    ASSERT_TRUE(CommitStep(dir_, step, 20).ok());
  }
  std::vector<std::string> Listed() const {
    auto text = ReadFileToString(TfCheckpointDirectory(dir_) + "/checkpoint");
    if (!text.ok()) return {};
    return ParseCheckpointState(text.value(), "checkpoint").value().all_model_checkpoint_paths;
  }

  std::string dir_;
  TfCheckpointWriter writer_{{/*max_to_keep=*/2, {}}};
};

TEST_F(TfCheckpointWriterTest, ACommittedStepIsJoinedAndWrittenTheNewestTwoKept) {
  for (int64_t step : {10, 20, 30}) {
    SaveAndCommit(step);
    auto prefix = writer_.Write(dir_, step);
    ASSERT_TRUE(prefix.ok()) << prefix.status().ToString();
    EXPECT_EQ(*prefix, dir_ + "/tf/model.ckpt-" + std::to_string(step));
  }
  EXPECT_EQ(Listed(), (std::vector<std::string>{"model.ckpt-20", "model.ckpt-30"}));
  EXPECT_FALSE(IsTfBundle(dir_ + "/tf/model.ckpt-10"));
  auto back = ReadTfCheckpoint(dir_ + "/tf/model.ckpt-30");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->global_step, 30);
  EXPECT_EQ(back->tensors.at("fc/bias")[1], 30.0f);
  EXPECT_EQ(back->tensors.at("fc/weights").shape(), (Shape{2, 3}));
}

TEST_F(TfCheckpointWriterTest, ShardsNotAllUnderTheTrainDirWriteNothingAndSaySo) {
  SaveAndCommit(10);
  fs::remove_all(ShardDirectory(dir_, 1, 2));  // ps 1 keeps its shard on its own host's disk
  auto prefix = writer_.Write(dir_, 10);
  ASSERT_FALSE(prefix.ok());
  EXPECT_EQ(prefix.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(prefix.status().message().find("not ps-1-of-2"), std::string::npos)
      << prefix.status().ToString();
  EXPECT_FALSE(fs::exists(TfCheckpointDirectory(dir_)));
  writer_.WriteOrWarn(dir_, 10);  // a warning, once
}

TEST_F(TfCheckpointWriterTest, AStepThatIsNotTheCommittedOneThereIsNotWritten) {
  SaveAndCommit(10);
  Save(0, 20);  // ps 1 has not written step 20
  auto prefix = writer_.Write(dir_, 20);
  ASSERT_FALSE(prefix.ok());
  EXPECT_NE(prefix.status().message().find("is 10, not committed step 20"), std::string::npos)
      << prefix.status().ToString();
}

TEST_F(TfCheckpointWriterTest, StepsTheClusterWentBackBehindLeaveTheList) {
  SaveAndCommit(10);
  ASSERT_TRUE(writer_.Write(dir_, 10).ok());
  SaveAndCommit(20);
  ASSERT_TRUE(writer_.Write(dir_, 20).ok());
  // A restart restored step 10 and trained on: 20 is uncommitted, and step 15 committed.
  ASSERT_TRUE(UncommitStepsAfter(dir_, 10).ok());
  SaveAndCommit(15);
  ASSERT_TRUE(writer_.Write(dir_, 15).ok());
  EXPECT_EQ(Listed(), (std::vector<std::string>{"model.ckpt-10", "model.ckpt-15"}));
  EXPECT_FALSE(IsTfBundle(dir_ + "/tf/model.ckpt-20"));
}

TEST_F(TfCheckpointWriterTest, AFailedWriteIsAnErrorNamingTheFileAndOnlyAWarningAfterACommit) {
  SaveAndCommit(10);
  std::ofstream(TfCheckpointDirectory(dir_)) << "a file where the directory should be";
  auto prefix = writer_.Write(dir_, 10);
  ASSERT_FALSE(prefix.ok());
  EXPECT_NE(prefix.status().message().find(dir_ + "/tf"), std::string::npos)
      << prefix.status().ToString();
  SetChiefTfCheckpointWriter(std::make_unique<TfCheckpointWriter>(TfCheckpointOptions{}));
  AfterCheckpointCommitted(dir_, 10);  // logs a warning and returns
  SetChiefTfCheckpointWriter(nullptr);
}

}  // namespace
}  // namespace pstrain::worker
