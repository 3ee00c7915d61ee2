// The simulator against arithmetic it must reproduce, and the plan against pstrain's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "bench/scale_sim/model_variables.h"
#include "bench/scale_sim/scenario.h"
#include "bench/scale_sim/step_plan.h"
#include "worker/distributed/push_parts.h"

namespace scale_sim {
namespace {

// Bytes on a link of `bits_per_s` as SimGrid's TCP model carries them (bandwidth factor 0.97).
double WireSeconds(double bytes, double bits_per_s) { return bytes * 8 / (0.97 * bits_per_s); }

TEST(ScaleSimModel, ResNet50HasTheConfigsParameters) {
  const std::vector<SimVariable> variables = ResNet50Variables();
  int64_t trainable = 0, all = 0;
  for (const SimVariable& v : variables) {
    all += v.elements();
    if (v.trainable) trainable += v.elements();
  }
  EXPECT_EQ(trainable, 25'557'032);        // what the chief logs for configs/resnet50.yaml
  EXPECT_EQ(all - trainable, 2 * 26'560);  // two statistics a channel, 53 batch norms
  EXPECT_EQ(variables.size(), 267u);
  EXPECT_EQ(variables.back().name, "fc/bias");
}

TEST(ScaleSimPlan, PartsHoldEveryPartitionOnceInBackwardOrderAndAtLeastAPartEach) {
  const std::vector<SimVariable> variables = ResNet50Variables();
  const int64_t part = int64_t{4} << 20;
  const StepPlan plan = PlanStep(variables, 5, int64_t{8} << 20, part, false);
  std::multiset<int> seen;
  int64_t bytes = 0;
  for (const std::vector<SimPart>& parts : plan.parts) {
    for (size_t k = 0; k < parts.size(); ++k) {
      for (int p : parts[k].partitions) {
        seen.insert(p);
        EXPECT_EQ(plan.partitions[p].server, parts[k].server);
      }
      bytes += parts[k].bytes;
      // A part ends at its size, or at a layer once it holds a share of it (PlanStepParts);
      // only a server's last part may be shorter. Later parts hold lower layers.
      if (k + 1 < parts.size()) {
        EXPECT_GE(parts[k].bytes, part / pstrain::worker::kStepLayerFloorDivisor);
      }
      if (k > 0) {
        EXPECT_LE(parts[k].first_layer, parts[k - 1].first_layer);
      }
    }
  }
  EXPECT_EQ(seen.size(), plan.partitions.size());
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), plan.partitions.size());
  EXPECT_EQ(bytes, plan.bytes);
  // s4's 3x3 convolutions (9.4 MB) are split in two by 8 MiB partitions; fc's 8.2 MB is not.
  std::map<int, int> partitions_of;
  for (const SimPartition& p : plan.partitions) ++partitions_of[p.variable];
  for (size_t v = 0; v < variables.size(); ++v) {
    EXPECT_EQ(partitions_of[v], variables[v].bytes() > (int64_t{8} << 20) ? 2 : 1)
        << variables[v].name;
  }
}

TEST(ScaleSimPlan, PerLayerPartsNeverHoldTwoLayers) {
  const std::vector<SimVariable> variables = ResNet50Variables();
  const StepPlan plan = PlanStep(variables, 3, int64_t{8} << 20, int64_t{4} << 20, true);
  for (const auto& parts : plan.parts) {
    for (const SimPart& part : parts) {
      std::set<int> layers;
      for (int p : part.partitions) layers.insert(variables[plan.partitions[p].variable].layer);
      EXPECT_EQ(layers.size(), 1u);
    }
  }
}

Scenario OneWorkerOneServer(double compute_s, PushMode mode) {
  Scenario s;
  s.step_s = compute_s;
  s.mode = mode;
  s.compute_jitter = 0;
  s.steps = 5;
  return s;
}

TEST(ScaleSim, OneWorkerWithoutOverlapStepsComputeThenPushThenPull) {
  const double bytes = PlanStep(ResNet50Variables(), 1, 8 << 20, 0, false).bytes;
  for (double compute : {0.035, 0.8}) {
    const Outcome o = RunScenario(OneWorkerOneServer(compute, PushMode::kAfterBackward));
    ASSERT_TRUE(o.ok);
    const double expected = compute + 2 * WireSeconds(bytes, 1e9);
    EXPECT_NEAR(o.step_s / expected, 1.0, 0.03) << compute << " s of compute";
  }
}

TEST(ScaleSim, OverlappedIsNoSlowerAndNoFasterThanComputeOrTransfer) {
  const double bytes = PlanStep(ResNet50Variables(), 1, 8 << 20, 0, false).bytes;
  const double transfer = WireSeconds(bytes, 1e9);
  for (double compute : {0.035, 0.8, 2.0}) {
    const Outcome after = RunScenario(OneWorkerOneServer(compute, PushMode::kAfterBackward));
    const Outcome overlapped = RunScenario(OneWorkerOneServer(compute, PushMode::kOverlapped));
    ASSERT_TRUE(after.ok && overlapped.ok);
    EXPECT_LE(overlapped.step_s, after.step_s) << compute << " s of compute";
    EXPECT_GE(overlapped.step_s, std::max(compute, transfer)) << compute << " s of compute";
    // Nothing leaves in the forward third, parts leave one after another on the connection, and
    // the last part's push and pull follow backward (8.4 MB: the largest part).
    EXPECT_LE(overlapped.step_s,
              std::max(compute / 3 + 1.05 * transfer, compute) + 2 * WireSeconds(8.4e6, 1e9))
        << compute << " s of compute";
  }
}

TEST(ScaleSim, ServersLinkIsTheBusiestWhenManyHostsPushIntoOne) {
  // 8 hosts of one GPU into one server host with cores to spare at 10 Gbit/s: its link carries
  // 8 pushes in and 8 pulls out a step, and nothing else is as busy.
  Scenario s;
  s.worker_hosts = 8;
  s.server_cores = 64;
  s.server_processes = 4;
  s.link_bits_per_s = 10e9;
  s.mode = PushMode::kOverlapped;
  s.steps = 12;
  s.warmup_steps = 4;
  const Outcome o = RunScenario(s);
  ASSERT_TRUE(o.ok);
  EXPECT_GT(o.server_link, 0.75);
  for (double other : {o.server_cpu, o.worker_link, o.worker_cpu}) EXPECT_LT(other, o.server_link);
  const double bytes = PlanStep(ResNet50Variables(), 4, 8 << 20, 0, false).bytes;
  EXPECT_LE(o.images_per_s, 10e9 / 8 / bytes * kBatch * 1.001);
}

}  // namespace
}  // namespace scale_sim
