// The chief's commit record and its choice of the step every shard restores
// (common/checkpoint/cluster_checkpoint.h): only steps every shard finished are committed, the
// newest committed step every shard holds whole is picked, and a mix of steps never is.
#include "common/checkpoint/cluster_checkpoint.h"

#include <gtest/gtest.h>

#include "common/checkpoint/atomic_file.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using Steps = std::vector<int64_t>;

class ClusterCheckpointTest : public testing_util::ScratchDirTest {};

TEST_F(ClusterCheckpointTest, CommittedStepsAreRecordedInOrderInTensorFlowsStateFormat) {
  EXPECT_EQ(ReadCommittedSteps(dir_).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(CommitStep(dir_, 150, 0).ok());
  ASSERT_TRUE(CommitStep(dir_, 300, 0).ok());
  EXPECT_EQ(ReadCommittedSteps(dir_).value(), (Steps{150, 300}));
  // The same text format as a shard's `checkpoint` index, naming the step's shard files.
  const std::string text = ReadFileToString(CommitRecordPath(dir_)).value();
  EXPECT_NE(text.find("model_checkpoint_path: \"model.ckpt-300\""), std::string::npos) << text;
  EXPECT_NE(text.find("all_model_checkpoint_paths: \"model.ckpt-150\""), std::string::npos);
}

TEST_F(ClusterCheckpointTest, TheRecordKeepsTheNewestAndForgetsAbandonedSteps) {
  for (int64_t s : {100, 200, 300, 400}) ASSERT_TRUE(CommitStep(dir_, s, 3).ok());
  EXPECT_EQ(ReadCommittedSteps(dir_).value(), (Steps{200, 300, 400}));
  // The cluster went back to 200: 300 and 400 are no longer committed.
  ASSERT_TRUE(UncommitStepsAfter(dir_, 200).ok());
  EXPECT_EQ(ReadCommittedSteps(dir_).value(), (Steps{200}));
  // Taking out the last one leaves a record that commits nothing, not a missing record (which
  // would accept any step every shard holds).
  ASSERT_TRUE(UncommitStepsAfter(dir_, 199).ok());
  ASSERT_TRUE(ReadCommittedSteps(dir_).ok());
  EXPECT_TRUE(ReadCommittedSteps(dir_)->empty());
  EXPECT_EQ(NewestRestorableStep({{100, 200}, {200}}, ReadCommittedSteps(dir_).value()),
            std::nullopt);
}

TEST_F(ClusterCheckpointTest, RestorePicksTheNewestCommittedStepEveryShardHoldsWhole) {
  // Shard 1's file of 300 is damaged (it does not report it); 400 was never committed.
  const std::vector<Steps> whole = {{100, 200, 300, 400}, {100, 200, 400}, {200, 300, 400}};
  EXPECT_EQ(NewestRestorableStep(whole, Steps{100, 200, 300}), 200);
  EXPECT_EQ(NewestRestorableStep(whole, Steps{100, 200, 300, 400}), 400);
}

TEST_F(ClusterCheckpointTest, AStepOneShardWroteAndTheOtherDidNotIsNeverRestored) {
  // Killed between the two shards' saves of 300: shard 0 has it, shard 1 does not, no commit.
  const std::vector<Steps> whole = {{150, 300}, {150}};
  EXPECT_EQ(NewestRestorableStep(whole, Steps{150}), 150);
  // Without a record (a train_dir from before commits) only a step on every shard is taken.
  EXPECT_EQ(NewestRestorableStep(whole, std::nullopt), 150);
  // Nothing in common: nothing is restored, not each shard's own newest.
  EXPECT_EQ(NewestRestorableStep({{300}, {150}}, Steps{150, 300}), std::nullopt);
  EXPECT_EQ(NewestRestorableStep({{300}, {}}, std::nullopt), std::nullopt);
}

TEST_F(ClusterCheckpointTest, AnUnreadableRecordIsDataLossNamingIt) {
  ASSERT_TRUE(WriteFileAtomically(CommitRecordPath(dir_), "model_checkpoint_path: 12 {").ok());
  Result<Steps> steps = ReadCommittedSteps(dir_);
  ASSERT_EQ(steps.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(steps.status().message().find(CommitRecordPath(dir_)), std::string::npos);
  // The next commit rewrites it.
  ASSERT_TRUE(CommitStep(dir_, 500, 0).ok());
  EXPECT_EQ(ReadCommittedSteps(dir_).value(), (Steps{500}));
}

TEST_F(ClusterCheckpointTest, AStepIsReadFromItsCheckpointsName) {
  EXPECT_EQ(StepOfCheckpoint("/run/ps-0-of-2/model.ckpt-300"), 300);
  EXPECT_EQ(StepOfCheckpoint("/run/ps-0-of-2/model.ckpt-300.damaged"), std::nullopt);
}

}  // namespace
}  // namespace pstrain
