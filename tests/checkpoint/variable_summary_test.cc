// `pstrain-checkpoint print`'s summary of one variable: exact statistics (NaN and Inf counted
// apart, the rest over finite values), a variable split across two servers joined back in part
// order at the step a restart would restore, and an unknown name answered with the names there.
#include "common/checkpoint/variable_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/checkpoint/cluster_checkpoint.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/variable_summary_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Tensor Values(const Shape& shape, std::vector<float> v) {
  Tensor t(shape);
  for (size_t i = 0; i < v.size(); ++i) t[i] = v[i];
  return t;
}

TEST(VariableSummaryTest, StatisticsCountNanAndInfApartAndUseTheFiniteValues) {
  const std::string dir = FreshDir("stats");
  CheckpointData data;
  data.global_step = 42;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  data.tensors["fc/weights"] = Values(Shape{2, 3}, {1, -3, nan, 0, inf, 6});
  data.tensors["fc/bias"] = Values(Shape{2}, {0, 0});
  const std::string file = dir + "/model.ckpt-42";
  ASSERT_TRUE(WriteCheckpoint(file, data).ok());
  auto s = SummarizeVariable(file, "fc/weights");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->value.shape(), (Shape{2, 3}));
  EXPECT_EQ(s->global_step, 42);
  EXPECT_EQ(s->nan_count, 1);
  EXPECT_EQ(s->inf_count, 1);
  EXPECT_EQ(s->zero_count, 1);
  EXPECT_DOUBLE_EQ(s->min, -3);
  EXPECT_DOUBLE_EQ(s->max, 6);
  EXPECT_DOUBLE_EQ(s->mean, 1.0);  // (1 - 3 + 0 + 6) / 4
  EXPECT_NEAR(s->stddev, std::sqrt((0.0 + 16 + 1 + 25) / 4), 1e-9);
  const std::string text = FormatVariableSummary(*s);
  EXPECT_NE(text.find("fc/weights: float32 [2,3], 6 values, global step 42"), std::string::npos)
      << text;
  EXPECT_NE(text.find("NaN 1  Inf 1"), std::string::npos) << text;
}

TEST(VariableSummaryTest, AVariableSplitAcrossServersIsJoinedAtTheRestoredStep) {
  const std::string dir = FreshDir("cluster");
  for (int64_t step : {100, 200}) {
    for (int task = 0; task < 2; ++task) {
      CheckpointData shard;
      shard.global_step = step;
      const float base = static_cast<float>(step + 10 * task);
      shard.tensors["big/part_" + std::to_string(task)] =
          Values(Shape{2, 2}, {base, base + 1, base + 2, base + 3});
      ASSERT_TRUE(CheckpointManager(ShardDirectory(dir, task, 2), 5).Save(shard).ok());
    }
  }
  ASSERT_TRUE(CommitStep(dir, 100, 5).ok());  // 200 was saved but never committed
  auto s = SummarizeVariable(dir, "big");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->global_step, 100);
  EXPECT_EQ(s->value.shape(), (Shape{4, 2}));
  const std::vector<float> expected = {100, 101, 102, 103, 110, 111, 112, 113};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s->value[i], expected[i]) << i;
  EXPECT_EQ(s->files.size(), 2u);
}

TEST(VariableSummaryTest, AnUnknownNameIsAnsweredWithTheNamesThere) {
  const std::string dir = FreshDir("unknown");
  CheckpointData data;
  data.tensors["conv1/weights"] = Values(Shape{1}, {1});
  ASSERT_TRUE(CheckpointManager(dir, 5).Save(data).ok());
  auto s = SummarizeVariable(dir, "conv1/weight");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("no variable 'conv1/weight'"), std::string::npos);
  EXPECT_NE(s.status().message().find("conv1/weights"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace pstrain
