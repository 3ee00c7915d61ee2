// Gradient clipping by value, by norm and by global norm, and the `clipping:` config node.
#include "ps/clipping.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/config.h"
#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

Result<ClippingOptions> FromYaml(const std::string& node_yaml) {
  ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::Parse("clipping: " + node_yaml, "t.yaml"));
  ASSIGN_OR_RETURN(ConfigNode node, root.Child("clipping"));
  return ClippingOptions::FromConfig(node);
}

std::string ErrorOf(const std::string& node_yaml) {
  auto options = FromYaml(node_yaml);
  EXPECT_FALSE(options.ok()) << node_yaml << " was accepted";
  return options.ok() ? "" : options.status().message();
}

TEST(ClippingTest, ClipByValueClampsEachElement) {
  Tensor g = Vec({-3.0f, -0.5f, 0.0f, 0.75f, 2.0f});
  ClipByValue(-1.0f, 1.0f, &g);
  EXPECT_EQ(g.ToVector(), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.75f, 1.0f}));
}

TEST(ClippingTest, ClipByNormScalesDownAboveThreshold) {
  Tensor g = Vec({3.0f, 4.0f});  // norm 5
  EXPECT_DOUBLE_EQ(ClipByNorm(2.5f, &g), 5.0);
  ExpectValues(g, {1.5, 2.0}, "clipped");  // [3, 4] * 2.5 / 5
}

TEST(ClippingTest, ClipByNormLeavesGradientWithinNormUnchanged) {
  Tensor g = Vec({3.0f, 4.0f});
  EXPECT_DOUBLE_EQ(ClipByNorm(10.0f, &g), 5.0);
  EXPECT_EQ(g.ToVector(), (std::vector<float>{3.0f, 4.0f}));
}

TEST(ClippingTest, ClipByGlobalNormSkipsAbsentGradients) {
  Tensor a = Vec({3.0f});
  Tensor b = Vec({0.0f, 4.0f});
  Tensor never_computed;  // a variable that got no gradient this step
  // global norm = sqrt(9 + 16) = 5; scale = 1 / 5.
  EXPECT_DOUBLE_EQ(ClipByGlobalNorm(1.0f, {&a, nullptr, &never_computed, &b}), 5.0);
  ExpectValues(a, {0.6}, "a");
  ExpectValues(b, {0.0, 0.8}, "b");
  EXPECT_TRUE(never_computed.empty());
}

TEST(ClippingTest, ClipByGlobalNormLeavesGradientsWithinNormUnchanged) {
  Tensor a = Vec({3.0f});
  Tensor b = Vec({4.0f});
  EXPECT_DOUBLE_EQ(ClipByGlobalNorm(5.0f, {&a, &b}), 5.0);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[0], 4.0f);
}

TEST(ClippingTest, NonFiniteGlobalNormPoisonsTheStepLikeTensorFlow) {
  Tensor a = Vec({std::numeric_limits<float>::infinity()});
  Tensor b = Vec({1.0f});
  EXPECT_TRUE(std::isinf(ClipByGlobalNorm(1.0f, {&a, &b})));
  EXPECT_TRUE(std::isnan(b[0]));
}

TEST(ClippingTest, LargeTensorSumOfSquaresMatchesSerialDoubleSum) {
  const int64_t n = (1 << 20) + 5;  // above the threshold for the threaded path
  Tensor t(Shape{n});
  double serial = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    t[i] = std::sin(0.001f * i) * 3.0f;
    serial += static_cast<double>(t[i]) * t[i];
  }
  EXPECT_NEAR(SumOfSquares(t), serial, 1e-9 * serial);
  const float clip = static_cast<float>(std::sqrt(serial) / 2);
  Tensor expected = t.Clone();
  ClipByNorm(clip, &t);
  EXPECT_NEAR(std::sqrt(SumOfSquares(t)), clip, 1e-5 * clip);
  for (int64_t i = 0; i < n; i += 4099) EXPECT_NEAR(t[i], expected[i] / 2, 1e-6) << i;
  EXPECT_NEAR(t[n - 1], expected[n - 1] / 2, 1e-6);
}

TEST(ClippingTest, ConfigReadsEveryMethod) {
  auto options = FromYaml("{by_value: [-2, 3], by_norm: 4, by_global_norm: 5}");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  ASSERT_TRUE(options->by_value.has_value());
  EXPECT_EQ(options->by_value->first, -2.0f);
  EXPECT_EQ(options->by_value->second, 3.0f);
  EXPECT_EQ(options->by_norm.value_or(0), 4.0f);
  EXPECT_EQ(options->by_global_norm.value_or(0), 5.0f);

  auto only_global = FromYaml("{by_global_norm: 1.5}");
  ASSERT_TRUE(only_global.ok());
  EXPECT_FALSE(only_global->by_value.has_value());
  EXPECT_FALSE(only_global->by_norm.has_value());
  EXPECT_TRUE(only_global->enabled());
  EXPECT_FALSE(ClippingOptions().enabled());
}

TEST(ClippingTest, ConfigErrorsNameTheField) {
  EXPECT_NE(ErrorOf("{by_value: [1, -1]}")
                .find("t.yaml: clipping: field 'by_value' must be "
                      "[min, max] with min < max, got [1, -1]"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{by_value: [1, 1]}").find("min < max"), std::string::npos);
  EXPECT_NE(ErrorOf("{by_value: [1, 2, 3]}").find("2 numbers, got 3"), std::string::npos);
  EXPECT_NE(ErrorOf("{by_norm: 0}").find("field 'by_norm' must be > 0, got 0"), std::string::npos);
  EXPECT_NE(ErrorOf("{by_global_norm: -1}").find("field 'by_global_norm' must be > 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{by_gobal_norm: 1}").find("unknown field 'by_gobal_norm'"), std::string::npos);
}

TEST(ClippingTest, WorkersClipByGlobalNormAndServersByValueAndNorm) {
  ClippingOptions options;
  options.by_value = {-4.0f, 4.0f};
  options.by_norm = 5.0f;
  options.by_global_norm = 3.0f;
  const ClippingOptions worker = options.WorkerSide(), server = options.ServerSide();
  EXPECT_FALSE(worker.by_value.has_value());
  EXPECT_FALSE(worker.by_norm.has_value());
  ASSERT_TRUE(worker.by_global_norm.has_value());
  EXPECT_EQ(*worker.by_global_norm, 3.0f);
  ASSERT_TRUE(server.by_value.has_value());
  EXPECT_EQ(server.by_value->second, 4.0f);
  ASSERT_TRUE(server.by_norm.has_value());
  EXPECT_FALSE(server.by_global_norm.has_value());
  // Nothing is lost or applied twice: the two sides together are the config.
  EXPECT_TRUE(worker.enabled() && server.enabled());
  EXPECT_FALSE(ClippingOptions{}.WorkerSide().enabled() ||
               ClippingOptions{}.ServerSide().enabled());
}

}  // namespace
}  // namespace pstrain::ps
