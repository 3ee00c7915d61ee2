#include "common/summary/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace pstrain {
namespace {

// TF's Histogram::Add (std::upper_bound per value) and EncodeToProto, written the slow way.
Histogram ReferenceHistogram(const std::vector<float>& values) {
  const std::vector<double>& limits = DefaultBucketLimits();
  std::vector<double> counts(limits.size(), 0.0);
  for (float f : values) {
    counts[std::upper_bound(limits.begin(), limits.end(), static_cast<double>(f)) -
           limits.begin()] += 1.0;
  }
  Histogram h;
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i];
    double count = counts[i];
    ++i;
    if (count <= 0.0) {
      while (i < counts.size() && counts[i] <= 0.0) {
        end = limits[i];
        count = counts[i];
        ++i;
      }
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

TEST(HistogramTest, DefaultBucketLimitsAreTensorFlows) {
  const std::vector<double>& limits = DefaultBucketLimits();
  // 774 positive limits 1e-12 * 1.1^k below 1e20, DBL_MAX, their negatives, and 0.
  ASSERT_EQ(limits.size(), 1551u);
  EXPECT_EQ(limits.front(), -DBL_MAX);
  EXPECT_EQ(limits[775], 0.0);
  EXPECT_EQ(limits[776], 1e-12);
  EXPECT_DOUBLE_EQ(limits[777], 1.1e-12);
  EXPECT_LT(limits[1549], 1e20);
  EXPECT_GT(limits[1549] * 1.1, 1e20);
  EXPECT_EQ(limits.back(), DBL_MAX);
  for (size_t i = 0; i < limits.size(); ++i) {
    EXPECT_EQ(limits[i], -limits[limits.size() - 1 - i]) << i;
    if (i > 0) {
      EXPECT_LT(limits[i - 1], limits[i]) << i;
    }
  }
}

TEST(HistogramTest, SummarizesMinMaxNumSumAndSquares) {
  const std::vector<float> values = {-2.0f, -0.5f, 0.0f, 0.0f, 1.0f, 3.5f};
  const Histogram h = ComputeHistogram(values.data(), values.size());
  EXPECT_EQ(h.min, -2.0);
  EXPECT_EQ(h.max, 3.5);
  EXPECT_EQ(h.num, 6.0);
  EXPECT_EQ(h.sum, 2.0);
  EXPECT_EQ(h.sum_squares, 17.5);
  EXPECT_EQ(h.non_finite, 0);
  double total = 0;
  for (double c : h.bucket) total += c;
  EXPECT_EQ(total, 6.0);
  ASSERT_EQ(h.bucket.size(), h.bucket_limit.size());
  for (size_t i = 1; i < h.bucket_limit.size(); ++i) {
    EXPECT_LT(h.bucket_limit[i - 1], h.bucket_limit[i]);
  }
  // Each value lies in its bucket: [previous limit, limit).
  for (float f : values) {
    auto it = std::upper_bound(h.bucket_limit.begin(), h.bucket_limit.end(), f);
    ASSERT_NE(it, h.bucket_limit.end());
    EXPECT_GT(h.bucket[it - h.bucket_limit.begin()], 0.0) << f;
  }
}

TEST(HistogramTest, EmptyBucketRunsCollapseLikeTensorFlow) {
  const std::vector<float> values = {1.0f, 1.0f};
  const Histogram h = ComputeHistogram(values.data(), values.size());
  const std::vector<double>& limits = DefaultBucketLimits();
  const size_t b = std::upper_bound(limits.begin(), limits.end(), 1.0) - limits.begin();
  // Empty run up to 1.0's bucket, the bucket itself, empty run up to DBL_MAX.
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{limits[b - 1], limits[b], DBL_MAX}));
  EXPECT_EQ(h.bucket, (std::vector<double>{0.0, 2.0, 0.0}));
  EXPECT_LE(limits[b - 1], 1.0);
  EXPECT_GT(limits[b], 1.0);
}

TEST(HistogramTest, BucketsMatchBinarySearchAcrossMagnitudesAndEdges) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-45.0, 38.5);
  std::vector<float> values;
  for (int i = 0; i < 20000; ++i) {
    const float magnitude = static_cast<float>(std::pow(10.0, exponent(rng)));
    values.push_back(i % 2 ? magnitude : -magnitude);
  }
  // Values on and next to every limit a float can hold, where an off-by-one would show.
  for (double limit : DefaultBucketLimits()) {
    if (std::fabs(limit) > FLT_MAX) continue;
    const float f = static_cast<float>(limit);
    values.push_back(f);
    values.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
    values.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
  }
  for (float f : {0.0f, -0.0f, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX, -FLT_MAX,
                  1.0f, -1.0f}) {
    values.push_back(f);
  }
  const Histogram got = ComputeHistogram(values.data(), values.size());
  const Histogram want = ReferenceHistogram(values);
  EXPECT_EQ(got.bucket_limit, want.bucket_limit);
  EXPECT_EQ(got.bucket, want.bucket);
  EXPECT_EQ(got.num, static_cast<double>(values.size()));
  EXPECT_EQ(got.min, -FLT_MAX);
  EXPECT_EQ(got.max, FLT_MAX);
}

TEST(HistogramTest, NonFiniteValuesAreLeftOutAndCounted) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {1.0f, std::nanf(""), inf, -inf, -3.0f};
  const Histogram h = ComputeHistogram(values.data(), values.size());
  EXPECT_EQ(h.non_finite, 3);
  EXPECT_EQ(h.num, 2.0);
  EXPECT_EQ(h.min, -3.0);
  EXPECT_EQ(h.max, 1.0);
  EXPECT_EQ(h.sum, -2.0);
  EXPECT_EQ(h.sum_squares, 10.0);
}

TEST(HistogramTest, NoValuesGiveOneEmptyBucket) {
  const Histogram h = ComputeHistogram(nullptr, 0);
  EXPECT_EQ(h.num, 0.0);
  EXPECT_EQ(h.min, 0.0);
  EXPECT_EQ(h.max, 0.0);
  EXPECT_EQ(h.bucket_limit, std::vector<double>{DBL_MAX});
  EXPECT_EQ(h.bucket, std::vector<double>{0.0});
}

TEST(HistogramTest, ThreeMillionValuesTakeWellUnderASecond) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> values(3'000'000);
  for (float& v : values) v = normal(rng);
  const auto start = std::chrono::steady_clock::now();
  const Histogram h = ComputeHistogram(values.data(), values.size());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(h.num, 3e6);
  // A few ms when optimised; the bound leaves room for debug builds and busy machines.
  EXPECT_LT(secs, 1.0);
  RecordProperty("seconds", std::to_string(secs));
  std::printf("3M-value histogram: %.1f ms\n", secs * 1e3);
}

}  // namespace
}  // namespace pstrain
