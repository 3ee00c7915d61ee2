// --push_dtype (worker/distributed/push_dtype.h): the values it takes, and the error feedback that
// carries bfloat16's rounding into the next push so that the servers receive the gradients' sum.
#include "worker/distributed/push_dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/bfloat16.h"

namespace pstrain {
namespace worker {
namespace {

// The distance between bfloat16 neighbours at `x` (7 mantissa bits).
double Bfloat16Ulp(float x) {
  int exponent = 0;
  std::frexp(static_cast<double>(x), &exponent);  // x = m * 2^exponent, 0.5 <= |m| < 1
  return std::ldexp(1.0, exponent - 8);
}

TEST(PushDTypeTest, Fp32AndBf16AreTakenAndAnythingElseIsRefusedNamingIt) {
  EXPECT_EQ(ParsePushDType("fp32").value(), wire::TensorDType::kFloat32);
  EXPECT_EQ(ParsePushDType("bf16").value(), wire::TensorDType::kBfloat16);
  for (const char* bad : {"BF16", "bfloat16", "", "fp8"}) {
    Result<wire::TensorDType> parsed = ParsePushDType(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("--push_dtype must be fp32 or bf16, got '") + bad + "'");
  }
  Result<wire::TensorDType> fp16 = ParsePushDType("fp16");
  ASSERT_FALSE(fp16.ok());
  EXPECT_NE(fp16.status().message().find("--push_dtype=fp16 is not supported"), std::string::npos);
  EXPECT_NE(fp16.status().message().find("loss scaling"), std::string::npos);
  EXPECT_NE(fp16.status().message().find("--push_dtype=bf16"), std::string::npos);
}

TEST(ErrorFeedbackTest, WhatIsSentIsBfloat16AndTheGradientIsLeftAsItWas) {
  ErrorFeedback feedback;
  const Tensor g = Tensor::FromVector(Shape{3}, {0.1f, -3.3f, 1e-20f});
  const Tensor sent = feedback.Round("w", g);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sent[i], RoundToBfloat16(sent[i])) << "element " << i << " is no bfloat16";
    EXPECT_EQ(sent[i], RoundToBfloat16(g[i])) << "the first push has no residual yet";
    EXPECT_EQ(feedback.Residual("w")[i], g[i] - sent[i]) << i;
  }
  EXPECT_EQ(g[0], 0.1f);
  EXPECT_TRUE(feedback.Residual("b").empty());
}

TEST(ErrorFeedbackTest, AConstantGradientBetweenTwoBfloat16sIsSentAsTheMixThatSumsToIt) {
  // 1 + 2^-9 lies a quarter of the way from 1 to the next bfloat16, 1 + 2^-7: rounding alone
  // sends 1 every step and loses 2^-9 a step; with the residual every fourth push sends 1 + 2^-7.
  ErrorFeedback feedback;
  const float g = 1.0f + std::ldexp(1.0f, -9);
  int ones = 0, ups = 0;
  double sent_sum = 0;
  for (int step = 0; step < 400; ++step) {
    const float sent = feedback.Round("w", Tensor::Filled(Shape{1}, g))[0];
    if (sent == 1.0f) ++ones;
    if (sent == 1.0f + std::ldexp(1.0f, -7)) ++ups;
    sent_sum += sent;
  }
  EXPECT_EQ(ones, 300);
  EXPECT_EQ(ups, 100);
  EXPECT_EQ(sent_sum, 400.0 * g);
}

TEST(ErrorFeedbackTest, TheSumOfSentValuesTracksTheSumOfGradientsWithinOneUlpOfTheLast) {
  // Gradients on a grid of 2^-28 below 2^-7, so that float32 adds them exactly: what is left is
  // bfloat16's rounding, and the residual bounds the gap at every step.
  constexpr int kElements = 64, kSteps = 2000;
  std::mt19937 rng(27);
  std::uniform_int_distribution<int32_t> grid(-(1 << 21), 1 << 21);
  ErrorFeedback feedback;
  std::vector<double> true_sum(kElements), sent_sum(kElements);
  double widest_gap_in_ulps = 0;
  for (int step = 0; step < kSteps; ++step) {
    Tensor g = Tensor::Uninitialized(Shape{kElements});
    for (int i = 0; i < kElements; ++i) g[i] = std::ldexp(static_cast<float>(grid(rng)), -28);
    const Tensor sent = feedback.Round("fc1/weights", g);
    for (int i = 0; i < kElements; ++i) {
      true_sum[i] += g[i];
      sent_sum[i] += sent[i];
      if (sent[i] == 0.0f) continue;  // then the sum was exact: nothing was left over
      const double gap = std::fabs(true_sum[i] - sent_sum[i]);
      widest_gap_in_ulps = std::max(widest_gap_in_ulps, gap / Bfloat16Ulp(sent[i]));
      ASSERT_LE(gap, Bfloat16Ulp(sent[i]))
          << "element " << i << " at step " << step << ": sent " << sent_sum[i] << " in all, "
          << "the gradients sum to " << true_sum[i];
    }
  }
  // Plain rounding, for contrast, drifts by many ulps over the same steps.
  std::mt19937 again(27);
  double plain_gap = 0;
  for (int step = 0; step < kSteps; ++step) {
    const float x = std::ldexp(static_cast<float>(grid(again)), -28);
    plain_gap += static_cast<double>(x) - RoundToBfloat16(x);
    for (int i = 1; i < kElements; ++i) grid(again);
  }
  std::printf(
      "error feedback: widest gap %.3f ulp of the last sent value; plain rounding of "
      "element 0 drifted %.3g from its sum of %.3g\n",
      widest_gap_in_ulps, plain_gap, true_sum[0]);
  EXPECT_LE(widest_gap_in_ulps, 1.0);
}

TEST(ErrorFeedbackTest, ANonFiniteSumIsSentAsItIsAndLeavesNoResidual) {
  ErrorFeedback feedback;
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor sent = feedback.Round("w", Tensor::FromVector(Shape{2}, {inf, 0.3f}));
  EXPECT_EQ(sent[0], inf);
  EXPECT_EQ(feedback.Residual("w")[0], 0.0f);
  const Tensor next = feedback.Round("w", Tensor::FromVector(Shape{2}, {0.5f, 0.3f}));
  EXPECT_EQ(next[0], 0.5f) << "a NaN or Inf must not stay in the residual";
}

TEST(ErrorFeedbackTest, EachKeyKeepsItsOwnResidual) {
  ErrorFeedback feedback;
  const float g = 1.0f + std::ldexp(1.0f, -9);
  feedback.Round("a", Tensor::Filled(Shape{1}, g));
  feedback.Round("a", Tensor::Filled(Shape{1}, g));
  EXPECT_EQ(feedback.Residual("a")[0], 2 * std::ldexp(1.0f, -9));
  EXPECT_EQ(feedback.Round("b", Tensor::Filled(Shape{1}, g))[0], 1.0f);
  EXPECT_EQ(feedback.Residual("b")[0], std::ldexp(1.0f, -9));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain
