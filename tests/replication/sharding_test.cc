#include "common/replication/sharding.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace replication {
namespace {

TEST(ShardingTest, GreedyPutsEachVariableOnTheLeastLoadedServerInModelOrder) {
  // 400, 100, 100, 300 bytes on two servers: 400 -> ps0, 100 -> ps1, 100 -> ps1, 300 -> ps1.
  auto p = Sharding::Compute(
      {{"a", Shape{100}}, {"b", Shape{25}}, {"c", Shape{25}}, {"d", Shape{75}}}, 2, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<int> tasks;
  for (const auto& part : p->partitions()) tasks.push_back(part.task);
  EXPECT_EQ(tasks, (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(p->Loads(), (std::vector<int64_t>{400, 500}));
}

TEST(ShardingTest, LargeVariablesAreSplitAlongRowsAcrossServers) {
  // 10 rows x 100 floats = 4000 bytes, partitions of at most 1500 bytes: 3 parts of 4/3/3 rows.
  auto p = Sharding::Compute({{"fc/weights", Shape{10, 100}}, {"fc/bias", Shape{100}}}, 2, 1500);
  ASSERT_TRUE(p.ok());
  const auto& parts = p->partitions();
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].key, "fc/weights/part_0");
  EXPECT_EQ(parts[0].shape, (Shape{4, 100}));
  EXPECT_EQ(parts[1].row_begin, 4);
  EXPECT_EQ(parts[2].row_end, 10);
  EXPECT_EQ(parts[3].key, "fc/bias");
  // Partitions spread over both servers, each holding some.
  EXPECT_FALSE(p->OnTask(0).empty());
  EXPECT_FALSE(p->OnTask(1).empty());
  int64_t rows = 0;
  for (int i = 0; i < 3; ++i) rows += parts[i].row_end - parts[i].row_begin;
  EXPECT_EQ(rows, 10);
}

TEST(ShardingTest, EveryProcessComputesTheSamePlacement) {
  std::vector<VariableSpec> vars{{"conv1/weights", Shape{32, 1, 5, 5}},
                                 {"fc1/weights", Shape{1024, 3136}},
                                 {"fc1/bias", Shape{1024}}};
  auto a = Sharding::Compute(vars, 3, 8 << 20).value();
  auto b = Sharding::Compute(vars, 3, 8 << 20).value();
  ASSERT_EQ(a.partitions().size(), b.partitions().size());
  for (size_t i = 0; i < a.partitions().size(); ++i) {
    EXPECT_EQ(a.partitions()[i].key, b.partitions()[i].key);
    EXPECT_EQ(a.partitions()[i].task, b.partitions()[i].task);
  }
}

TEST(ShardingTest, BadArgumentsAreRefused) {
  EXPECT_FALSE(Sharding::Compute({{"a", Shape{1}}}, 0, 0).ok());
  EXPECT_FALSE(Sharding::Compute({{"a", Shape{1}}}, 1, -1).ok());
}

}  // namespace
}  // namespace replication
}  // namespace pstrain
