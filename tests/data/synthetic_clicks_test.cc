// The synthetic click log: Zipf-distributed ids, labels that follow the hidden probabilities, and
// records that read back through the feature schema.
#include "common/data/synthetic_clicks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/binary_metrics.h"

namespace pstrain {
namespace {

SyntheticClickOptions Small() {
  SyntheticClickOptions o;
  o.dense = 3;
  o.categorical = 4;
  o.vocabulary = 100;
  return o;
}

TEST(SyntheticClicksTest, IdsFollowTheZipfLaw) {
  SyntheticClicks clicks(Small());
  std::map<int64_t, int64_t> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    double p;
    ++counts[clicks.Next(&p).ids[1][0]];
  }
  // Rank r has probability (r + 1)^-1.1 / H with H = sum over 100 ranks (about 4.28).
  double h = 0.0;
  for (int r = 0; r < 100; ++r) h += std::pow(r + 1.0, -1.1);
  for (int rank : {0, 1, 9}) {
    const double expected = n * std::pow(rank + 1.0, -1.1) / h;
    EXPECT_NEAR(counts[SyntheticClicks::IdOf(0, rank)], expected, 5 * std::sqrt(expected))
        << "rank " << rank;
  }
}

TEST(SyntheticClicksTest, LabelsFollowTheHiddenProbabilities) {
  SyntheticClicks clicks(Small());
  double sum_p = 0.0;
  int64_t positives = 0;
  std::vector<double> p;
  std::vector<int32_t> y;
  for (int i = 0; i < 20000; ++i) {
    double q;
    const FeatureExample e = clicks.Next(&q);
    sum_p += q;
    positives += e.label;
    p.push_back(q);
    y.push_back(e.label);
  }
  EXPECT_NEAR(static_cast<double>(positives), sum_p, 5 * std::sqrt(sum_p));
  // The hidden model ranks far better than chance, and worse than a perfect ranking.
  const double auc = RocAuc(p, y).value();
  EXPECT_GT(auc, 0.65);
  EXPECT_LT(auc, 0.95);
}

TEST(SyntheticClicksTest, RecordsReadBackThroughTheSchema) {
  SyntheticClicks clicks(Small());
  const FeatureSchema schema = clicks.Schema();
  ASSERT_EQ(schema.features.size(), 5u);
  EXPECT_EQ(schema.features[4].name, "C4");
  double p;
  const FeatureExample e = clicks.Next(&p);
  auto back = ParseFeatureExample(EncodeFeatureExample(schema, e), schema, 0);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->floats[0], e.floats[0]);
  EXPECT_EQ(back->ids[3], e.ids[3]);
  EXPECT_EQ(back->label, e.label);
}

TEST(SyntheticClicksTest, BadOptionsNameTheFlag) {
  SyntheticClickOptions o = Small();
  o.vocabulary = 0;
  EXPECT_NE(o.Validate().message().find("--vocabulary"), std::string::npos);
  o = Small();
  o.zipf_exponent = 0.0;
  EXPECT_NE(o.Validate().message().find("--zipf_exponent"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
