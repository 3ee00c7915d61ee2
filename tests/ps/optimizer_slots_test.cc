// Slots: named like TF's kernels, resettable, restorable, and checked before every update.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ps/optimizer.h"
#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

const Shape kShape{3, 4};

Tensor Pattern(float phase) {
  Tensor t(kShape);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = std::sin(phase + 0.37f * i);
  return t;
}

// The gradient fed at `step`: different at every step so the slots matter.
Tensor GradAt(int64_t step) { return Pattern(1.0f + step); }

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

Slots CloneSlots(const Slots& slots) {
  Slots copy;
  for (const auto& [name, tensor] : slots) copy.emplace(name, tensor.Clone());
  return copy;
}

TEST(OptimizerSlotsTest, SlotsAreNamedLikeTensorFlowKernels) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"{type: sgd}", {}},
      {"{type: momentum}", {"momentum"}},
      {"{type: adam}", {"m", "v"}},
      {"{type: adagrad}", {"accumulator"}},
      {"{type: rmsprop}", {"ms", "mom"}},
      {"{type: rmsprop, centered: true}", {"ms", "mom", "mg"}},
  };
  for (const auto& [config, names] : expected) {
    auto optimizer = MustOptimizer(config);
    EXPECT_EQ(optimizer->slot_names(), names) << config;
    Slots slots = optimizer->CreateSlots(kShape);
    ASSERT_EQ(slots.size(), names.size()) << config;
    for (const auto& name : names) EXPECT_EQ(slots.at(name).shape(), kShape) << config;
  }
}

TEST(OptimizerSlotsTest, SlotsStartAtTensorFlowInitialValues) {
  EXPECT_EQ(MustOptimizer("{type: adam}")->CreateSlots(kShape).at("v")[5], 0.0f);
  EXPECT_EQ(MustOptimizer("{type: adagrad}")->CreateSlots(kShape).at("accumulator")[5], 0.1f);
  Slots rms = MustOptimizer("{type: rmsprop, centered: true}")->CreateSlots(kShape);
  EXPECT_EQ(rms.at("ms")[5], 1.0f);
  EXPECT_EQ(rms.at("mom")[5], 0.0f);
  EXPECT_EQ(rms.at("mg")[5], 0.0f);
}

TEST(OptimizerSlotsTest, ResetSlotsRestoresInitialValuesInPlace) {
  for (const std::string& config : AllOptimizerConfigs()) {
    auto optimizer = MustOptimizer(config);
    Tensor var = Pattern(0.0f);
    Slots slots = optimizer->CreateSlots(kShape);
    const Slots fresh = optimizer->CreateSlots(kShape);
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(optimizer->Apply(0.1f, step, GradAt(step), &var, &slots).ok()) << config;
    }
    std::map<std::string, const float*> buffers;
    for (const auto& [name, tensor] : slots) {
      EXPECT_FALSE(SameBits(tensor, fresh.at(name))) << config << " slot " << name;
      buffers[name] = tensor.data();
    }
    optimizer->ResetSlots(&slots);
    for (const auto& [name, tensor] : slots) {
      EXPECT_TRUE(SameBits(tensor, fresh.at(name))) << config << " slot " << name;
      EXPECT_EQ(tensor.data(), buffers[name]) << config << " slot " << name;
    }
  }
}

TEST(OptimizerSlotsTest, RestoredSlotsContinueIdentically) {
  for (const std::string& config : AllOptimizerConfigs()) {
    auto running = MustOptimizer(config);
    Tensor var = Pattern(0.0f);
    Slots slots = running->CreateSlots(kShape);
    for (int64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(running->Apply(0.1f, step, GradAt(step), &var, &slots).ok()) << config;
    }
    // What a checkpoint holds, restored into a new optimizer as after a restart.
    Tensor restored_var = var.Clone();
    Slots restored_slots = CloneSlots(slots);
    auto restarted = MustOptimizer(config);
    for (int64_t step = 3; step < 5; ++step) {
      ASSERT_TRUE(running->Apply(0.1f, step, GradAt(step), &var, &slots).ok());
      ASSERT_TRUE(restarted->Apply(0.1f, step, GradAt(step), &restored_var, &restored_slots).ok());
    }
    EXPECT_TRUE(SameBits(var, restored_var)) << config;
    for (const auto& [name, tensor] : slots) {
      EXPECT_TRUE(SameBits(tensor, restored_slots.at(name))) << config << " slot " << name;
    }
  }
}

TEST(OptimizerSlotsTest, GradientShapeMismatchIsAnErrorNamingBothShapes) {
  auto adam = MustOptimizer("{type: adam}");
  Tensor var = Pattern(0.0f);
  Slots slots = adam->CreateSlots(kShape);
  Tensor grad(Shape{4, 3});
  Status status = adam->Apply(0.1f, 0, grad, &var, &slots);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("[4,3]"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("[3,4]"), std::string::npos) << status.message();
}

TEST(OptimizerSlotsTest, SlotShapeMismatchIsAnErrorNamingTheSlot) {
  auto adam = MustOptimizer("{type: adam}");
  Tensor var = Pattern(0.0f);
  Slots slots = adam->CreateSlots(kShape);
  slots["v"] = Tensor(Shape{12});
  Status status = adam->Apply(0.1f, 0, GradAt(0), &var, &slots);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("slot 'v' has shape [12]"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("[3,4]"), std::string::npos) << status.message();
}

TEST(OptimizerSlotsTest, MissingSlotIsAnErrorNamingTheSlot) {
  auto rmsprop = MustOptimizer("{type: rmsprop, centered: true}");
  Tensor var = Pattern(0.0f);
  Slots slots = rmsprop->CreateSlots(kShape);
  slots.erase("mg");
  Status status = rmsprop->Apply(0.1f, 0, GradAt(0), &var, &slots);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("slot 'mg' is missing"), std::string::npos) << status.message();
}

TEST(OptimizerSlotsTest, FailedApplyChangesNothing) {
  auto momentum = MustOptimizer("{type: momentum}");
  Tensor var = Pattern(0.0f);
  Slots slots = momentum->CreateSlots(kShape);
  const Tensor var_before = var.Clone();
  EXPECT_FALSE(momentum->Apply(0.1f, 0, Tensor(Shape{12}), &var, &slots).ok());
  EXPECT_FALSE(momentum->Apply(0.1f, -1, GradAt(0), &var, &slots).ok());
  EXPECT_TRUE(SameBits(var, var_before));
  EXPECT_TRUE(SameBits(slots.at("momentum"), Tensor(kShape)));
}

}  // namespace
}  // namespace pstrain::ps
