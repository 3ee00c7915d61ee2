// How a step's push is cut into parts (worker/distributed/push_parts.h): each server's partitions
// in the order backward finishes them, every one exactly once, in parts of at least the size
// asked for (the last of a server may be smaller); and where a worker pushes whole steps instead.
#include "worker/distributed/push_parts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "tests/distributed/sized_variables.h"
#include "worker/distributed/training_step.h"

namespace pstrain {
namespace worker {
namespace {

using testing::kMiB;
using testing::SizedVariable;

TEST(PushPartsTest, EachServerGetsItsPartitionsLastLayerFirstInPartsOfTheSizeAsked) {
  const std::vector<replication::VariableSpec> specs = {
      SizedVariable("conv1/weights", kMiB / 4), SizedVariable("conv2/weights", 3 * kMiB),
      SizedVariable("fc1/weights", 12 * kMiB), SizedVariable("fc1/bias", 4 * 1024),
      SizedVariable("fc2/weights", kMiB)};
  std::vector<std::string> order;
  for (const auto& s : specs) order.push_back(s.name);
  auto sharding = replication::Sharding::Compute(specs, 2, 8 * kMiB);
  ASSERT_TRUE(sharding.ok()) << sharding.status().ToString();
  const auto parts = PlanPushParts(*sharding, order, 2 * kMiB);
  ASSERT_EQ(parts.size(), 2u);
  std::map<std::string, int> seen;
  for (int s = 0; s < 2; ++s) {
    ASSERT_FALSE(parts[s].empty()) << "server " << s;
    int last_variable = static_cast<int>(order.size());
    for (size_t k = 0; k < parts[s].size(); ++k) {
      const PushPart& part = parts[s][k];
      int64_t bytes = 0;
      for (const replication::Partition& p : part.partitions) {
        EXPECT_EQ(p.task, s) << p.key;
        ++seen[p.key];
        bytes += p.shape.num_elements() * 4;
        // Backward's order: a variable never comes after one of a later layer.
        const int v =
            static_cast<int>(std::find(order.begin(), order.end(), p.variable) - order.begin());
        EXPECT_LE(v, last_variable) << p.key;
        last_variable = v;
      }
      EXPECT_EQ(bytes, part.bytes);
      if (k + 1 < parts[s].size()) {
        EXPECT_GE(part.bytes, 2 * kMiB) << "server " << s;
      }
      // A part closes as soon as it holds the size asked for: it exceeds it by one partition at
      // most (RefNet's fc1 is cut into 8 MiB partitions by --partition_bytes).
      EXPECT_LT(part.bytes - part.partitions.back().shape.num_elements() * 4, 2 * kMiB);
    }
  }
  ASSERT_EQ(seen.size(), sharding->partitions().size());
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key;
}

TEST(PushPartsTest, WithReplicasTheDefaultsAreSmallSoThatEachServerSendsRecordsPartByPart) {
  EXPECT_EQ(ChoosePushSizes(0, 1, std::nullopt, std::nullopt).partition_bytes, 8 * kMiB);
  EXPECT_EQ(ChoosePushSizes(0, 5, std::nullopt, std::nullopt).part_bytes, 4 * kMiB);
  const PushSizes replicated = ChoosePushSizes(1, 2, std::nullopt, std::nullopt);
  EXPECT_EQ(replicated.partition_bytes, kMiB);
  EXPECT_EQ(replicated.part_bytes, kMiB);
  // A size the user gave is kept, with or without replicas.
  EXPECT_EQ(ChoosePushSizes(1, 2, 8 * kMiB, std::nullopt).partition_bytes, 8 * kMiB);
  EXPECT_EQ(ChoosePushSizes(1, 2, 8 * kMiB, std::nullopt).part_bytes, kMiB);
  EXPECT_EQ(ChoosePushSizes(2, 3, std::nullopt, 16 * kMiB).part_bytes, 16 * kMiB);
  EXPECT_EQ(ChoosePushSizes(0, 8, 2 * kMiB, 2 * kMiB).partition_bytes, 2 * kMiB);
  // RefNet's fc1 (12.25 MiB) is one 6 MiB part a server by default; with replicas each server gets
  // it in several parts, each replicated while the next arrives.
  const std::vector<replication::VariableSpec> refnet = {
      SizedVariable("fc1/weights", 12 * kMiB + kMiB / 4), SizedVariable("fc2/weights", 40 * 1024)};
  auto count_parts = [&](const PushSizes& sizes) {
    auto sharding = replication::Sharding::Compute(refnet, 2, sizes.partition_bytes);
    EXPECT_TRUE(sharding.ok()) << sharding.status().ToString();
    const auto parts = PlanPushParts(*sharding, {"fc1/weights", "fc2/weights"}, sizes.part_bytes);
    return std::min(parts[0].size(), parts[1].size());
  };
  EXPECT_EQ(count_parts(ChoosePushSizes(0, 2, std::nullopt, std::nullopt)), 1u);
  EXPECT_GE(count_parts(replicated), 3u);
}

TEST(PushPartsTest, APartAsLargeAsTheModelIsOnePushPerServer) {
  const std::vector<replication::VariableSpec> specs = {
      SizedVariable("a", kMiB), SizedVariable("b", kMiB), SizedVariable("c", kMiB)};
  auto sharding = replication::Sharding::Compute(specs, 1, 0);
  ASSERT_TRUE(sharding.ok());
  const auto parts = PlanPushParts(*sharding, {"a", "b", "c"}, 64 * kMiB);
  ASSERT_EQ(parts.size(), 1u);
  ASSERT_EQ(parts[0].size(), 1u);
  ASSERT_EQ(parts[0][0].partitions.size(), 3u);
  EXPECT_EQ(parts[0][0].partitions[0].variable, "c");
  EXPECT_EQ(parts[0][0].partitions[2].variable, "a");
}

TEST(PushPartsTest, WithLayersGivenAPartEndsWhereALayerDoesAndStillAtItsSize) {
  // Layer 0: two variables; layer 1: one of 3 MiB, cut by size; layer 2: a small one. One server.
  const std::vector<replication::VariableSpec> specs = {
      SizedVariable("a/w", kMiB / 4), SizedVariable("a/b", 4096), SizedVariable("b/w", 3 * kMiB),
      SizedVariable("c/w", 64 * 1024)};
  auto sharding = replication::Sharding::Compute(specs, 1, kMiB);
  ASSERT_TRUE(sharding.ok()) << sharding.status().ToString();
  const std::vector<std::string> order = {"a/w", "a/b", "b/w", "c/w"};
  const std::map<std::string, int> layer_of = {{"a/w", 0}, {"a/b", 0}, {"b/w", 1}, {"c/w", 2}};
  const auto parts = PlanPushParts(*sharding, order, 2 * kMiB, layer_of);
  ASSERT_EQ(parts.size(), 1u);
  std::vector<std::string> layers;  // each part's layer, in order
  for (const PushPart& part : parts[0]) {
    std::set<int> in;
    for (const replication::Partition& p : part.partitions) in.insert(layer_of.at(p.variable));
    ASSERT_EQ(in.size(), 1u) << "a part spans layers";
    layers.push_back(std::string(1, static_cast<char>('a' + *in.begin())));
  }
  // c alone, b's three 1 MiB partitions in a 2 MiB part and a 1 MiB one, a's two together.
  EXPECT_EQ(layers, (std::vector<std::string>{"c", "b", "b", "a"}));
  EXPECT_EQ(parts[0][3].partitions.size(), 2u);
  // Without layers the same sizes mix them: c's 64 KiB waits in one part with b's first.
  EXPECT_EQ(PlanPushParts(*sharding, order, 2 * kMiB)[0][0].partitions.size(), 3u);
}

TEST(PushPartsTest, ManyServersDefaultToSmallSizesAsReplicasDoAndMoreIoThreads) {
  for (int num_ps : {1, kManyServers - 1}) {
    EXPECT_EQ(ChoosePushSizes(0, num_ps, std::nullopt, std::nullopt).partition_bytes, 8 * kMiB);
    EXPECT_EQ(ClientIoThreads(num_ps), 2);
  }
  EXPECT_EQ(ClientIoThreads(kManyServers), 4);  // and a client's connections more threads
  for (int num_ps : {kManyServers, 40}) {
    const PushSizes sizes = ChoosePushSizes(0, num_ps, std::nullopt, std::nullopt);
    EXPECT_EQ(sizes.partition_bytes, kMiB) << num_ps;
    EXPECT_EQ(sizes.part_bytes, kMiB) << num_ps;
    EXPECT_EQ(ChoosePushSizes(0, num_ps, 4 * kMiB, std::nullopt).partition_bytes, 4 * kMiB);
  }
}

// Layers, input side first: a/ 256 KiB and 4 KiB, b/ 3 MiB, c/ 64 KiB, d/ 1.5 MiB, in 1 MiB
// partitions on one server; parts of 2 MiB.
struct FourLayers {
  FourLayers() {
    auto computed = replication::Sharding::Compute(
        {SizedVariable("a/w", kMiB / 4), SizedVariable("a/b", 4096), SizedVariable("b/w", 3 * kMiB),
         SizedVariable("c/w", 64 * 1024), SizedVariable("d/w", 3 * kMiB / 2)},
        1, kMiB);
    EXPECT_TRUE(computed.ok()) << computed.status().ToString();
    sharding = *computed;
  }
  // Each part's layers, in the order they leave.
  std::vector<std::string> LayersOf(PullSchedule schedule) const {
    std::vector<std::string> out;
    const auto parts = PlanStepParts(sharding, layers, 2 * kMiB, schedule);
    for (const PushPart& part : parts.at(0)) {
      std::string in;
      for (const replication::Partition& p : part.partitions) {
        const std::string layer = p.variable.substr(0, 1);
        if (in.find(layer) == std::string::npos) in += layer;
      }
      out.push_back(in);
    }
    return out;
  }
  replication::Sharding sharding;
  const std::vector<LayerVariables> layers = {
      {"a", {"a/w", "a/b"}}, {"b", {"b/w"}}, {"c", {"c/w"}}, {"d", {"d/w"}}};
};

TEST(PushPartsTest, TheStepPullsPartsEndAtALayerOnceTheyHoldAQuarterOfTheirSize) {
  static_assert(kStepLayerFloorDivisor == 4, "the sizes below are for a quarter");
  const FourLayers model;
  // d's 1.5 MiB is past a quarter of 2 MiB, so c starts a part; c's 64 KiB is not, so b's first
  // partitions join it rather than leave c alone; a starts anew after b's last 1 MiB.
  EXPECT_EQ(model.LayersOf(PullSchedule::kStep), (std::vector<std::string>{"d", "cb", "b", "a"}));
  // Per-layer pulls: a part never holds two layers.
  EXPECT_EQ(model.LayersOf(PullSchedule::kPerLayer),
            (std::vector<std::string>{"d", "c", "b", "b", "a"}));
}

TEST(PushPartsTest, TheWorkerPushesWholeStepsWhereAPartCouldNotGoAloneAndSaysWhy) {
  TrainConfig train;
  EXPECT_EQ(WhyPushWholeSteps(train, /*async=*/true, /*alone_on_host=*/true, Device::kCpu), "");
  EXPECT_NE(WhyPushWholeSteps(train, false, true, Device::kCpu).find("accumulate or sync"),
            std::string::npos);
  // A host of CPU workers overlaps too: its leader pushes each part as the host's average of it
  // is done. A GPU host's average (and its download) come between backward and the push.
  EXPECT_EQ(WhyPushWholeSteps(train, true, /*alone_on_host=*/false, Device::kCpu), "");
  EXPECT_NE(WhyPushWholeSteps(train, true, false, Device::kGpu).find("GPU host's average"),
            std::string::npos);
  EXPECT_NE(WhyPushWholeSteps(train, true, true, Device::kGpu).find("GPU"), std::string::npos);
  train.clipping.by_global_norm = 5.0f;
  EXPECT_NE(WhyPushWholeSteps(train, true, true, Device::kCpu).find("clip_by_global_norm"),
            std::string::npos);
  // Per-tensor clipping is the servers': the push may still overlap.
  train.clipping.by_global_norm.reset();
  train.clipping.by_norm = 1.0f;
  EXPECT_EQ(WhyPushWholeSteps(train, true, true, Device::kCpu), "");
}

TEST(PushPartsTest, OnlyServersAllOnLoopbackAreOnLoopback) {
  EXPECT_TRUE(AllOnLoopback({"127.0.0.1:2222", "127.0.0.2:2223", "localhost:2224"}));
  EXPECT_TRUE(AllOnLoopback({"[::1]:2222"}));
  EXPECT_FALSE(AllOnLoopback({"127.0.0.1:2222", "10.213.0.1:2222"}));
  EXPECT_FALSE(AllOnLoopback({"ps0.example.com:2222"}));
  EXPECT_FALSE(AllOnLoopback({}));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
