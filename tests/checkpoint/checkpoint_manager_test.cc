#include "common/checkpoint/checkpoint_manager.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/captured_log.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

using testing_util::ReadBytes;
using testing_util::SmallModel;
using testing_util::WriteBytes;

class CheckpointManagerTest : public testing_util::ScratchDirTest {
 protected:
  // Saves steps 100, 200, ... count*100.
  void SaveSteps(CheckpointManager* manager, int count) {
    for (int i = 1; i <= count; ++i) {
      Result<std::string> path = manager->Save(SmallModel(100 * i, static_cast<float>(i)));
      ASSERT_TRUE(path.ok()) << path.status().ToString();
    }
  }
  bool Exists(const std::string& name) const { return std::filesystem::exists(Path(name)); }
};

TEST_F(CheckpointManagerTest, SaveWritesStepFileAndMakesItLatest) {
  CheckpointManager manager(dir_ + "/train", 5);
  Result<std::string> path = manager.Save(SmallModel(300));
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, dir_ + "/train/model.ckpt-300");
  EXPECT_EQ(manager.LatestPath().value(), *path);
  Result<CheckpointData> restored = manager.RestoreLatest();
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->global_step, 300);
}

TEST_F(CheckpointManagerTest, EmptyDirectoryHasNoLatest) {
  CheckpointManager manager(dir_, 5);
  EXPECT_EQ(manager.LatestPath().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager.RestoreLatest().status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(manager.AllPaths().value().empty());
}

TEST_F(CheckpointManagerTest, IndexIsTensorFlowTextFormatWithRelativeNames) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 3);
  EXPECT_EQ(ReadBytes(Path("checkpoint")),
            "model_checkpoint_path: \"model.ckpt-300\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-100\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-200\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-300\"\n");
}

TEST_F(CheckpointManagerTest, MaxToKeepDeletesOldestAndIndexListsTheRest) {
  CheckpointManager manager(dir_, 3);
  SaveSteps(&manager, 5);
  EXPECT_FALSE(Exists("model.ckpt-100"));
  EXPECT_FALSE(Exists("model.ckpt-200"));
  for (const char* kept : {"model.ckpt-300", "model.ckpt-400", "model.ckpt-500"}) {
    EXPECT_TRUE(Exists(kept)) << kept;
  }
  EXPECT_EQ(manager.AllPaths().value(),
            (std::vector<std::string>{Path("model.ckpt-300"), Path("model.ckpt-400"),
                                      Path("model.ckpt-500")}));
  EXPECT_EQ(manager.LatestPath().value(), Path("model.ckpt-500"));
}

TEST_F(CheckpointManagerTest, MaxToKeepZeroKeepsEveryCheckpoint) {
  CheckpointManager manager(dir_, 0);
  SaveSteps(&manager, 6);
  EXPECT_EQ(manager.AllPaths().value().size(), 6u);
  EXPECT_TRUE(Exists("model.ckpt-100"));
}

TEST_F(CheckpointManagerTest, RestartedManagerContinuesTheIndex) {
  {
    CheckpointManager first(dir_, 2);
    SaveSteps(&first, 2);
  }
  CheckpointManager second(dir_, 2);
  ASSERT_TRUE(second.Save(SmallModel(300)).ok());
  EXPECT_FALSE(Exists("model.ckpt-100"));
  EXPECT_EQ(second.AllPaths().value(),
            (std::vector<std::string>{Path("model.ckpt-200"), Path("model.ckpt-300")}));
}

TEST_F(CheckpointManagerTest, ResavingAListedStepReplacesItAndMakesItLatest) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 3);
  // Restored from step 200, trained on, saved 200 again (e.g. after a data fix).
  ASSERT_TRUE(manager.Save(SmallModel(200, 9.0f)).ok());
  EXPECT_EQ(manager.AllPaths().value(),
            (std::vector<std::string>{Path("model.ckpt-100"), Path("model.ckpt-300"),
                                      Path("model.ckpt-200")}));
  EXPECT_EQ(manager.RestoreLatest()->tensors.at("fc2/bias")[0],
            SmallModel(200, 9.0f).tensors.at("fc2/bias")[0]);
}

TEST_F(CheckpointManagerTest, LeftoverTempFileFromACrashIsIgnored) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 2);
  // A save of step 300 died halfway: only part of its temporary file exists.
  std::string full = ReadBytes(Path("model.ckpt-200"));
  WriteBytes(Path("model.ckpt-300.tmp-99999"), full.substr(0, full.size() / 2));
  WriteBytes(Path("checkpoint.tmp-99999"), "model_checkpoint_path: \"model.ck");
  Result<CheckpointData> restored = manager.RestoreLatest();
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->global_step, 200);
  ASSERT_TRUE(manager.Save(SmallModel(300)).ok());
  EXPECT_EQ(manager.RestoreLatest()->global_step, 300);
}

TEST_F(CheckpointManagerTest, ADamagedLatestIsSkippedWithAWarningNamingItAndThePreviousRestored) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 3);
  std::string bytes = ReadBytes(Path("model.ckpt-300"));
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 16; ++i) bytes[i] ^= 0x5a;
  WriteBytes(Path("model.ckpt-300"), bytes);

  testing::CapturedLog log;
  Result<CheckpointData> latest = manager.RestoreLatest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->global_step, 200);
  EXPECT_TRUE(testing_util::BitwiseEqual(latest->tensors.at("fc2/bias"),
                                         SmallModel(200, 2.0f).tensors.at("fc2/bias")));
  EXPECT_NE(
      log.Find({"WARNING", "skipping checkpoint " + Path("model.ckpt-300"), "checksum mismatch"}),
      "");
}

TEST_F(CheckpointManagerTest, ANamedDamagedCheckpointIsAnErrorNamingIt) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 3);
  std::string bytes = ReadBytes(Path("model.ckpt-300"));
  bytes[bytes.size() - 100] ^= 0x40;
  WriteBytes(Path("model.ckpt-300"), bytes);
  // --checkpoint_path is strict: the user asked for this file.
  Result<CheckpointData> named = manager.Restore("model.ckpt-300");
  ASSERT_EQ(named.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(named.status().message().find(Path("model.ckpt-300") + ": checksum mismatch"),
            std::string::npos)
      << named.status().message();
}

TEST_F(CheckpointManagerTest, WhenEveryListedCheckpointIsDamagedTheErrorNamesTheNewest) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 2);
  for (const char* name : {"model.ckpt-100", "model.ckpt-200"}) {
    std::string bytes = ReadBytes(Path(name));
    bytes[bytes.size() / 2] ^= 0x01;
    WriteBytes(Path(name), bytes);
  }
  Result<CheckpointData> latest = manager.RestoreLatest();
  ASSERT_EQ(latest.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(latest.status().message().find(Path("model.ckpt-200")), std::string::npos)
      << latest.status().message();
}

TEST_F(CheckpointManagerTest, RemoveFromIndexKeepsTheRestAndTheLatestLast) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 3);
  ASSERT_TRUE(manager.RemoveFromIndex({Path("model.ckpt-300")}).ok());
  EXPECT_EQ(manager.LatestPath().value(), Path("model.ckpt-200"));
  EXPECT_EQ(manager.AllPaths().value(),
            (std::vector<std::string>{Path("model.ckpt-100"), Path("model.ckpt-200")}));
  EXPECT_TRUE(Exists("model.ckpt-300"));  // the files are the caller's
  ASSERT_TRUE(manager.RemoveFromIndex({Path("model.ckpt-100"), Path("model.ckpt-200")}).ok());
  EXPECT_EQ(manager.LatestPath().status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointManagerTest, RestoreResolvesNamesPathsAndDirectories) {
  CheckpointManager manager(dir_ + "/run1", 5);
  SaveSteps(&manager, 3);
  EXPECT_EQ(manager.Restore("model.ckpt-100")->global_step, 100);
  EXPECT_EQ(manager.Restore(dir_ + "/run1/model.ckpt-200")->global_step, 200);
  // Fine-tuning from another run's directory takes that run's latest.
  CheckpointManager other(dir_ + "/run2", 5);
  EXPECT_EQ(other.Restore(dir_ + "/run1")->global_step, 300);
  EXPECT_EQ(manager.Restore("model.ckpt-999").status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointManagerTest, PathFromLatestCountsBackAndStopsAtTheOldest) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 3);
  EXPECT_EQ(manager.PathFromLatest(0).value(), Path("model.ckpt-300"));
  EXPECT_EQ(manager.PathFromLatest(2).value(), Path("model.ckpt-100"));
  EXPECT_EQ(manager.PathFromLatest(3).status().code(), StatusCode::kOutOfRange);
}

TEST_F(CheckpointManagerTest, CorruptIndexIsDataLossAndTheNextSaveRewritesIt) {
  CheckpointManager manager(dir_, 5);
  SaveSteps(&manager, 1);
  WriteBytes(Path("checkpoint"), "model_checkpoint_path: model.ckpt-100 {{{\n");
  Result<std::string> latest = manager.LatestPath();
  ASSERT_EQ(latest.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(latest.status().message().find(Path("checkpoint") + ":1:"), std::string::npos)
      << latest.status().message();
  ASSERT_TRUE(manager.Save(SmallModel(200)).ok());
  EXPECT_EQ(manager.LatestPath().value(), Path("model.ckpt-200"));
}

}  // namespace
}  // namespace pstrain
