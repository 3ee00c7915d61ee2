// Small helpers shared by the optimizer tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/tensor.h"
#include "ps/optimizer.h"

namespace pstrain::ps {

// Builds an optimizer from an `optimizer:` node written as a YAML flow map.
inline Result<std::unique_ptr<Optimizer>> OptimizerFromYaml(const std::string& node_yaml) {
  ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse("optimizer: " + node_yaml, "test.yaml"));
  ASSIGN_OR_RETURN(ConfigNode node, root.Child("optimizer"));
  return Optimizer::FromConfig(node);
}

inline std::unique_ptr<Optimizer> MustOptimizer(const std::string& node_yaml) {
  auto optimizer = OptimizerFromYaml(node_yaml);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status().ToString();
  return std::move(optimizer).value();
}

// One config of every optimizer and option that changes the update loop.
inline std::vector<std::string> AllOptimizerConfigs() {
  return {"{type: sgd}",
          "{type: momentum}",
          "{type: momentum, nesterov: true}",
          "{type: adam}",
          "{type: adagrad}",
          "{type: rmsprop, momentum: 0.5}",
          "{type: rmsprop, momentum: 0.5, centered: true}",
          "{type: ftrl, l1_regularization_strength: 0.01, l2_regularization_strength: 0.1}",
          "{type: ftrl, learning_rate_power: -0.7}"};
}

inline Tensor Vec(const std::vector<float>& values) {
  return Tensor::FromVector(Shape{static_cast<int64_t>(values.size())}, values);
}

// Expects `t` to hold `expected` to about float precision.
inline void ExpectValues(const Tensor& t, const std::vector<double>& expected,
                         const std::string& what) {
  ASSERT_EQ(t.size(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(t[i], expected[i], 2e-6 * std::max(1.0, std::abs(expected[i])))
        << what << " element " << i;
  }
}

}  // namespace pstrain::ps
