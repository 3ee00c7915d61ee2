// The `optimizer:` config node: every type and field is read, and every mistake is named.
#include <gtest/gtest.h>

#include "ps/optimizer.h"
#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

std::string ErrorOf(const std::string& node_yaml) {
  auto optimizer = OptimizerFromYaml(node_yaml);
  EXPECT_FALSE(optimizer.ok()) << node_yaml << " was accepted";
  return optimizer.ok() ? "" : optimizer.status().message();
}

// The variable after one step from [1, -2] with gradient [0.5, -1] at lr 0.1.
std::vector<float> OneStep(const Optimizer& optimizer) {
  Tensor var = Vec({1.0f, -2.0f});
  Slots slots = optimizer.CreateSlots(var.shape());
  EXPECT_TRUE(optimizer.Apply(0.1f, 0, Vec({0.5f, -1.0f}), &var, &slots).ok());
  return var.ToVector();
}

TEST(OptimizerConfigTest, BlockYamlBuildsTheNamedType) {
  auto root = ConfigNode::Parse("optimizer:\n  type: adam\n  beta1: 0.9\n", "train.yaml");
  ASSERT_TRUE(root.ok());
  auto adam = Optimizer::FromConfig(root->Child("optimizer").value());
  ASSERT_TRUE(adam.ok()) << adam.status().ToString();
  EXPECT_STREQ(adam.value()->name(), "adam");
}

TEST(OptimizerConfigTest, EveryTypeIsKnown) {
  for (const std::string& type : Optimizer::KnownTypes()) {
    EXPECT_STREQ(MustOptimizer("{type: " + type + "}")->name(), type.c_str());
  }
  EXPECT_EQ(Optimizer::KnownTypes().size(), 6u);
}

TEST(OptimizerConfigTest, FieldsReachTheUpdate) {
  // Each pair differs only in one field; the updates must differ, and match the constructor.
  EXPECT_EQ(OneStep(*MustOptimizer("{type: momentum, momentum: 0.5, nesterov: true}")),
            OneStep(*NewMomentumOptimizer({0.5f, true}).value()));
  EXPECT_NE(OneStep(*MustOptimizer("{type: momentum, nesterov: true}")),
            OneStep(*MustOptimizer("{type: momentum, nesterov: false}")));
  EXPECT_EQ(OneStep(*MustOptimizer("{type: adam, beta1: 0.5, beta2: 0.9, epsilon: 0.1}")),
            OneStep(*NewAdamOptimizer({0.5f, 0.9f, 0.1f}).value()));
  EXPECT_NE(OneStep(*MustOptimizer("{type: adam, epsilon: 0.1}")),
            OneStep(*MustOptimizer("{type: adam}")));
  EXPECT_EQ(OneStep(*MustOptimizer("{type: adagrad, initial_accumulator_value: 1.0}")),
            OneStep(*NewAdagradOptimizer({1.0f}).value()));
  EXPECT_EQ(OneStep(*MustOptimizer(
                "{type: rmsprop, decay: 0.5, momentum: 0.2, epsilon: 0.01, centered: true}")),
            OneStep(*NewRMSPropOptimizer({0.5f, 0.2f, 0.01f, true}).value()));
  EXPECT_NE(OneStep(*MustOptimizer("{type: rmsprop, decay: 0.5}")),
            OneStep(*MustOptimizer("{type: rmsprop}")));
  EXPECT_EQ(OneStep(*MustOptimizer("{type: ftrl, learning_rate_power: -0.7, "
                                   "initial_accumulator_value: 0.5, l1_regularization_strength: "
                                   "0.01, l2_regularization_strength: 0.3}")),
            OneStep(*NewFtrlOptimizer({-0.7f, 0.5f, 0.01f, 0.3f}).value()));
  EXPECT_NE(OneStep(*MustOptimizer("{type: ftrl, learning_rate_power: -0.7}")),
            OneStep(*MustOptimizer("{type: ftrl}")));
  EXPECT_NE(OneStep(*MustOptimizer("{type: ftrl, l2_regularization_strength: 0.3}")),
            OneStep(*MustOptimizer("{type: ftrl}")));
}

TEST(OptimizerConfigTest, UnknownTypeListsKnownTypes) {
  const std::string error = ErrorOf("{type: adamw}");
  EXPECT_NE(error.find("test.yaml: optimizer"), std::string::npos) << error;
  EXPECT_NE(error.find("'adamw'"), std::string::npos) << error;
  EXPECT_NE(error.find("adagrad, adam, ftrl, momentum, rmsprop, sgd"), std::string::npos) << error;
}

TEST(OptimizerConfigTest, MissingTypeIsNamed) {
  EXPECT_NE(ErrorOf("{beta1: 0.9}").find("'type'"), std::string::npos);
}

TEST(OptimizerConfigTest, UnknownFieldIsNamed) {
  // A field of another optimizer is as wrong as a typo.
  EXPECT_NE(ErrorOf("{type: adam, beta_1: 0.9}").find("unknown field 'beta_1'"), std::string::npos);
  EXPECT_NE(ErrorOf("{type: sgd, momentum: 0.9}").find("unknown field 'momentum'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{type: momentum, use_nesterov: true}").find("unknown field 'use_nesterov'"),
            std::string::npos);
}

TEST(OptimizerConfigTest, BadValuesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{type: adam, beta1: 1.0}", "field 'beta1' must be in [0, 1), got 1"},
      {"{type: adam, beta2: -0.1}", "field 'beta2' must be in [0, 1), got -0.1"},
      {"{type: adam, epsilon: -1e-8}", "field 'epsilon' must be >= 0, got -1e-08"},
      {"{type: momentum, momentum: 1.5}", "field 'momentum' must be in [0, 1), got 1.5"},
      {"{type: adagrad, initial_accumulator_value: 0}",
       "field 'initial_accumulator_value' must be > 0, got 0"},
      {"{type: rmsprop, decay: 1}", "field 'decay' must be in [0, 1), got 1"},
      {"{type: ftrl, learning_rate_power: 0.5}", "field 'learning_rate_power' must be <= 0"},
      {"{type: ftrl, l1_regularization_strength: -1}",
       "field 'l1_regularization_strength' must be >= 0, got -1"},
      {"{type: rmsprop, epsilon: -1}", "field 'epsilon' must be >= 0, got -1"},
      {"{type: adam, beta1: fast}", "field 'beta1' must be a number, got 'fast'"},
      {"{type: momentum, nesterov: maybe}", "field 'nesterov' must be true or false"},
  };
  for (const auto& [config, expected] : cases) {
    const std::string error = ErrorOf(config);
    EXPECT_NE(error.find(expected), std::string::npos) << config << " gave: " << error;
    EXPECT_NE(error.find("test.yaml: optimizer"), std::string::npos) << error;
  }
}

TEST(OptimizerConfigTest, ConstructorsRejectBadOptionsToo) {
  auto adam = NewAdamOptimizer({0.9f, 1.0f, 1e-8f});
  ASSERT_FALSE(adam.ok());
  EXPECT_NE(adam.status().message().find("field 'beta2'"), std::string::npos);
}

}  // namespace
}  // namespace pstrain::ps
