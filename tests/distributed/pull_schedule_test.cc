// The per-layer pulls' plan (worker/distributed/pull_schedule.h): one request per layer and
// server, input side first, every partition of every variable in exactly one; a variable of no
// layer and a bad --pull_schedule are refused by name.
#include "worker/distributed/pull_schedule.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/distributed/sized_variables.h"

namespace pstrain {
namespace worker {
namespace {

using testing::kMiB;
using testing::SizedVariable;

TEST(PullScheduleTest, EachLayersPartitionsArePulledPerServerInLayerOrder) {
  // fc1's 12 MiB is cut into two partitions by 8 MiB --partition_bytes, one on each server.
  const std::vector<replication::VariableSpec> specs = {
      SizedVariable("conv1/weights", kMiB / 4), SizedVariable("conv1/bias", 4 * 1024),
      SizedVariable("fc1/weights", 12 * kMiB), SizedVariable("fc2/weights", kMiB)};
  auto sharding = replication::Sharding::Compute(specs, 2, 8 * kMiB);
  ASSERT_TRUE(sharding.ok()) << sharding.status().ToString();
  const std::vector<LayerVariables> layers = {{"conv1", {"conv1/weights", "conv1/bias"}},
                                              {"relu1", {}},
                                              {"fc1", {"fc1/weights"}},
                                              {"fc2", {"fc2/weights"}}};
  auto pulls = PlanLayerPulls(*sharding, layers);
  ASSERT_TRUE(pulls.ok()) << pulls.status().ToString();
  std::map<std::string, int> seen;
  int last_layer = 0;
  for (const LayerPull& pull : *pulls) {
    EXPECT_GE(pull.layer, last_layer) << pull.label;  // the input side first
    last_layer = pull.layer;
    EXPECT_NE(pull.layer, 1) << "a layer without variables has no pull";
    EXPECT_EQ(pull.label, layers[pull.layer].layer + "@ps" + std::to_string(pull.server));
    for (const replication::Partition& p : pull.partitions) {
      EXPECT_EQ(p.task, pull.server) << p.key;
      EXPECT_EQ(p.variable.substr(0, p.variable.find('/')), layers[pull.layer].layer) << p.key;
      ++seen[p.key];
    }
  }
  EXPECT_EQ(seen.size(), sharding->partitions().size());
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key;
  int fc1 = 0;
  for (const LayerPull& pull : *pulls) fc1 += pull.layer == 2;
  EXPECT_EQ(fc1, 2) << "fc1's partitions live on both servers: one pull each";
}

TEST(PullScheduleTest, AVariableOfNoLayerIsRefusedByName) {
  auto sharding = replication::Sharding::Compute(
      {SizedVariable("a", 4096), SizedVariable("b", 4096)}, 1, 8 * kMiB);
  ASSERT_TRUE(sharding.ok());
  auto pulls = PlanLayerPulls(*sharding, {{"only_a", {"a"}}});
  ASSERT_FALSE(pulls.ok());
  EXPECT_NE(pulls.status().message().find("variable 'b'"), std::string::npos)
      << pulls.status().ToString();
}

TEST(PullScheduleTest, TheFlagTakesItsThreeNamesAndRefusesOthersListingThem) {
  for (PullSchedule s : {PullSchedule::kStep, PullSchedule::kPerLayer, PullSchedule::kLate}) {
    auto parsed = ParsePullSchedule(PullScheduleName(s));
    ASSERT_TRUE(parsed.ok()) << PullScheduleName(s);
    EXPECT_EQ(*parsed, s);
  }
  auto bad = ParsePullSchedule("eager");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("step, per_layer or late, got 'eager'"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
