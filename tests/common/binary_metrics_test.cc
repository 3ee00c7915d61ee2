// AUC against counting every positive-negative pair, and the log loss against its definition.
#include "common/binary_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace pstrain {
namespace {

double PairCountAuc(const std::vector<double>& s, const std::vector<int32_t>& y) {
  double wins = 0.0, pairs = 0.0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] != 1 || y[j] != 0) continue;
      pairs += 1.0;
      wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
    }
  }
  return wins / pairs;
}

TEST(BinaryMetricsTest, AucEqualsThePairCountWithTiesCountingHalf) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> score(0, 9);  // many ties
  std::vector<double> s;
  std::vector<int32_t> y;
  for (int i = 0; i < 300; ++i) {
    const int v = score(rng);
    s.push_back(v);
    y.push_back(std::bernoulli_distribution(0.1 + 0.08 * v)(rng));
  }
  EXPECT_NEAR(RocAuc(s, y).value(), PairCountAuc(s, y), 1e-12);
  EXPECT_DOUBLE_EQ(RocAuc({0.1, 0.9, 0.4}, {0, 1, 0}).value(), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.9, 0.1}, {0, 1}).value(), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.5, 0.5, 0.5}, {0, 1, 1}).value(), 0.5);
}

TEST(BinaryMetricsTest, AucRefusesOneClassAndBadLabels) {
  EXPECT_NE(RocAuc({0.1, 0.2}, {1, 1}).status().message().find("positive and negative"),
            std::string::npos);
  EXPECT_NE(RocAuc({0.1, 0.2}, {0, 2}).status().message().find("label 2 is not 0 or 1"),
            std::string::npos);
  EXPECT_NE(RocAuc({0.1}, {0, 1}).status().message().find("1 scores but 2 labels"),
            std::string::npos);
}

TEST(BinaryMetricsTest, LogLossIsTheMeanNegativeLogLikelihoodClipped) {
  EXPECT_NEAR(LogLoss({0.8, 0.25}, {1, 0}), -(std::log(0.8) + std::log(0.75)) / 2.0, 1e-12);
  EXPECT_NEAR(LogLoss({0.0}, {1}), -std::log(1e-7), 1e-9);
}

}  // namespace
}  // namespace pstrain
