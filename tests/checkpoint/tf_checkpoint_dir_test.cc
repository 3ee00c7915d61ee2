// A directory of TensorFlow checkpoints as a Saver keeps one (tf_checkpoint_dir.h): the newest
// max_to_keep bundles listed and kept, older ones and steps no longer stood behind deleted, a
// pstrain train_dir never written into; Adam's betas taken from a training config.
#include "common/checkpoint/tf_checkpoint_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/checkpoint_index.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/tf_bundle.h"
#include "tests/checkpoint/test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using testing_util::ScratchDirTest;
using testing_util::SmallModel;

class TfCheckpointDirTest : public ScratchDirTest {
 protected:
  CheckpointState State() const {
    auto text = ReadFileToString(Path("tf/checkpoint"));
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    if (!text.ok()) return {};
    return ParseCheckpointState(text.value(), "tf/checkpoint").value();
  }
  // The bundles' files in tf/, sorted.
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(Path("tf"))) {
      if (e.path().filename() != "checkpoint") out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(TfCheckpointDirTest, TheNewestMaxToKeepAreListedAndOlderBundlesDeleted) {
  TfCheckpointDirOptions options;
  options.max_to_keep = 2;
  for (int64_t step : {100, 200, 300}) {
    auto prefix = SaveTfCheckpointInDir(Path("tf"), SmallModel(step), options);
    ASSERT_TRUE(prefix.ok()) << prefix.status().ToString();
    EXPECT_EQ(*prefix, Path("tf/model.ckpt-" + std::to_string(step)));
  }
  const CheckpointState state = State();
  EXPECT_EQ(state.model_checkpoint_path, "model.ckpt-300");
  EXPECT_EQ(state.all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-200", "model.ckpt-300"}));
  EXPECT_EQ(Files(), (std::vector<std::string>{
                         "model.ckpt-200.data-00000-of-00001", "model.ckpt-200.index",
                         "model.ckpt-300.data-00000-of-00001", "model.ckpt-300.index"}));
  auto latest = CheckpointManager(Path("tf"), 0).RestoreLatest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->global_step, 300);
}

TEST_F(TfCheckpointDirTest, StepsNoLongerKeptLeaveTheListAndTheirFilesGo) {
  TfCheckpointDirOptions options;
  for (int64_t step : {100, 200, 300}) {
    ASSERT_TRUE(SaveTfCheckpointInDir(Path("tf"), SmallModel(step), options).ok());
  }
  // The run went back to 100 (200 and 300 uncommitted) and saved 150.
  options.keep_step = [](int64_t step) { return step <= 150; };
  ASSERT_TRUE(SaveTfCheckpointInDir(Path("tf"), SmallModel(150), options).ok());
  EXPECT_EQ(State().all_model_checkpoint_paths,
            (std::vector<std::string>{"model.ckpt-100", "model.ckpt-150"}));
  EXPECT_FALSE(IsTfBundle(Path("tf/model.ckpt-300")));
  EXPECT_FALSE(fs::exists(Path("tf/model.ckpt-200.data-00000-of-00001")));
}

TEST_F(TfCheckpointDirTest, APstrainTrainDirIsRefusedNamingItsStateFile) {
  ASSERT_TRUE(CheckpointManager(Path("tf"), 5).Save(SmallModel(100)).ok());
  auto prefix = SaveTfCheckpointInDir(Path("tf"), SmallModel(200), {});
  ASSERT_FALSE(prefix.ok());
  EXPECT_NE(prefix.status().message().find(Path("tf/checkpoint") + " lists"), std::string::npos)
      << prefix.status().ToString();
  EXPECT_FALSE(IsTfBundle(Path("tf/model.ckpt-200")));
}

TEST_F(TfCheckpointDirTest, AdamsBetasComeFromTheConfigAndABadOneIsNamed) {
  std::ofstream(Path("adam.yaml"))
      << "train:\n  optimizer: {type: adam, beta1: 0.8, beta2: 0.99}\n";
  auto adam = TfExportOptionsFromConfig(Path("adam.yaml"));
  ASSERT_TRUE(adam.ok()) << adam.status().ToString();
  EXPECT_EQ(adam->adam_beta1, 0.8);
  EXPECT_EQ(adam->adam_beta2, 0.99);
  std::ofstream(Path("sgd.yaml")) << "train:\n  optimizer: {type: sgd}\n";
  auto sgd = TfExportOptionsFromConfig(Path("sgd.yaml"));
  ASSERT_TRUE(sgd.ok()) << sgd.status().ToString();
  EXPECT_EQ(sgd->adam_beta1, 0.9);
  std::ofstream(Path("bad.yaml")) << "train:\n  optimizer: {type: adam, beta2: 1.5}\n";
  auto bad = TfExportOptionsFromConfig(Path("bad.yaml"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.yaml: train.optimizer: beta2"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace pstrain
