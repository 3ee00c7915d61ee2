// Learning-rate schedules: exact values at chosen steps, TF's boundary semantics, config errors.
#include "ps/learning_rate.h"

#include <gtest/gtest.h>

#include "common/config.h"

namespace pstrain::ps {
namespace {

Result<LearningRateSchedule> FromYaml(const std::string& node_yaml) {
  ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse("learning_rate: " + node_yaml, "t.yaml"));
  ASSIGN_OR_RETURN(ConfigNode node, root.Child("learning_rate"));
  return LearningRateSchedule::FromConfig(node);
}

std::string ErrorOf(const std::string& node_yaml) {
  auto schedule = FromYaml(node_yaml);
  EXPECT_FALSE(schedule.ok()) << node_yaml << " was accepted";
  return schedule.ok() ? "" : schedule.status().message();
}

TEST(LearningRateTest, ConstantIgnoresTheStep) {
  auto lr = LearningRateSchedule::Constant(0.25).value();
  EXPECT_EQ(lr.At(0), 0.25f);
  EXPECT_EQ(lr.At(1000000), 0.25f);
}

TEST(LearningRateTest, ExponentialDecayIsContinuousWithoutStaircase) {
  auto lr = LearningRateSchedule::ExponentialDecay(0.1, 10, 0.5, false).value();
  EXPECT_FLOAT_EQ(lr.At(0), 0.1f);
  EXPECT_FLOAT_EQ(lr.At(5), 0.0707106781f);   // 0.1 * 0.5^0.5
  EXPECT_FLOAT_EQ(lr.At(10), 0.05f);          // 0.1 * 0.5^1
  EXPECT_FLOAT_EQ(lr.At(25), 0.0176776695f);  // 0.1 * 0.5^2.5
}

TEST(LearningRateTest, StaircaseDecaysOnlyAtMultiplesOfDecaySteps) {
  auto lr = LearningRateSchedule::ExponentialDecay(0.1, 10, 0.5, true).value();
  EXPECT_FLOAT_EQ(lr.At(0), 0.1f);
  EXPECT_FLOAT_EQ(lr.At(9), 0.1f);     // floor(0.9) = 0
  EXPECT_FLOAT_EQ(lr.At(10), 0.05f);   // floor(1.0) = 1
  EXPECT_FLOAT_EQ(lr.At(19), 0.05f);   // floor(1.9) = 1
  EXPECT_FLOAT_EQ(lr.At(20), 0.025f);  // floor(2.0) = 2
}

TEST(LearningRateTest, PiecewiseConstantSwitchesAfterEachBoundary) {
  auto lr = LearningRateSchedule::PiecewiseConstant({1000, 2000}, {0.1, 0.01, 0.001}).value();
  EXPECT_FLOAT_EQ(lr.At(0), 0.1f);
  EXPECT_FLOAT_EQ(lr.At(1000), 0.1f);  // step <= boundaries[0]
  EXPECT_FLOAT_EQ(lr.At(1001), 0.01f);
  EXPECT_FLOAT_EQ(lr.At(2000), 0.01f);  // boundaries[0] < step <= boundaries[1]
  EXPECT_FLOAT_EQ(lr.At(2001), 0.001f);
  EXPECT_FLOAT_EQ(lr.At(1000000000), 0.001f);
}

TEST(LearningRateTest, PiecewiseNeedsOneMoreValueThanBoundaries) {
  auto lr = LearningRateSchedule::PiecewiseConstant({1000, 2000}, {0.1, 0.01});
  ASSERT_FALSE(lr.ok());
  EXPECT_NE(lr.status().message().find("field 'values' must have one more entry"),
            std::string::npos)
      << lr.status().message();
}

TEST(LearningRateTest, PiecewiseBoundariesMustIncrease) {
  auto lr = LearningRateSchedule::PiecewiseConstant({2000, 1000}, {0.1, 0.01, 0.001});
  ASSERT_FALSE(lr.ok());
  EXPECT_NE(lr.status().message().find("'boundaries' must strictly increase"), std::string::npos);
}

TEST(LearningRateTest, ConfigBuildsEachSchedule) {
  auto exponential = FromYaml(
      "{schedule: exponential_decay, initial: 0.001, decay_steps: 1000, decay_rate: 0.96, "
      "staircase: true}");
  ASSERT_TRUE(exponential.ok()) << exponential.status().ToString();
  EXPECT_FLOAT_EQ(exponential->At(999), 0.001f);
  EXPECT_FLOAT_EQ(exponential->At(2500), 0.001f * 0.96f * 0.96f);

  auto piecewise = FromYaml("{schedule: piecewise_constant, boundaries: [10], values: [1, 2]}");
  ASSERT_TRUE(piecewise.ok()) << piecewise.status().ToString();
  EXPECT_EQ(piecewise->At(10), 1.0f);
  EXPECT_EQ(piecewise->At(11), 2.0f);

  auto constant = FromYaml("{initial: 0.5}");  // schedule defaults to constant
  ASSERT_TRUE(constant.ok()) << constant.status().ToString();
  EXPECT_EQ(constant->At(7), 0.5f);
}

TEST(LearningRateTest, ConfigErrorsNameTheField) {
  EXPECT_NE(ErrorOf("{schedule: cosine, initial: 0.1}")
                .find("unknown learning-rate schedule 'cosine' (known: constant, "
                      "exponential_decay, piecewise_constant)"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{schedule: constant, initial: 0.1, decay_steps: 5}")
                .find("unknown field 'decay_steps'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{schedule: exponential_decay, initial: 0.1, decay_steps: 0, "
                    "decay_rate: 0.5}")
                .find("t.yaml: learning_rate: field 'decay_steps' must be > 0, got 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{schedule: exponential_decay, initial: 0.1, decay_steps: 10}")
                .find("missing field 'decay_rate'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{initial: -0.1}").find("field 'initial' must be a learning rate from 0"),
            std::string::npos);
  // Beyond float32's range (found by fuzz_config): it would become infinity in the updates.
  EXPECT_NE(ErrorOf("{initial: 1.0e+300}")
                .find("field 'initial' must be a learning rate from 0 to 3.4e38 (float32)"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{schedule: piecewise_constant, boundaries: [10, 20], values: [1, 2]}")
                .find("field 'values' must have one more entry than 'boundaries' (3), got 2"),
            std::string::npos);
}

}  // namespace
}  // namespace pstrain::ps
