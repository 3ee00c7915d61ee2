// SparseTable against references written out here: the dense optimizer over the same rows where
// every row is touched, and per-coordinate formulas in double (lazy Adam, FTRL, Adagrad with
// repeated ids) where only some are.
#include "ps/sparse_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/ps/optimizer_test_util.h"

namespace pstrain::ps {
namespace {

SparseTableOptions Options(int64_t dimension, int64_t max_rows = 1000) {
  SparseTableOptions o;
  o.name = "C1";
  o.dimension = dimension;
  o.max_rows = max_rows;
  return o;
}

SparseTable Table(const SparseTableOptions& options, const std::string& optimizer_yaml,
                  double lr = 0.1, ClippingOptions clipping = {}) {
  return SparseTable(options, MustOptimizer(optimizer_yaml),
                     LearningRateSchedule::Constant(lr).value(), clipping);
}

Tensor RandomGrads(int64_t rows, int64_t d, std::mt19937_64* rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t(Shape{rows, d});
  for (int64_t i = 0; i < t.size(); ++i) t[i] = normal(*rng);
  return t;
}

std::vector<float> RowOf(const SparseTable& table, int64_t id) {
  const float* row = table.Row(id);
  EXPECT_NE(row, nullptr) << "id " << id;
  return row ? std::vector<float>(row, row + table.dimension()) : std::vector<float>();
}

TEST(SparseTableTest, LazyAdamOverEveryRowIsDenseAdamBitForBit) {
  const int64_t rows = 6, d = 4;
  SparseTable table = Table(Options(d), "{type: adam}");
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < rows; ++i) ids.push_back(100 + 7 * i);
  Tensor var = table.Gather(ids, 0).value();
  auto adam = MustOptimizer("{type: adam}");
  Slots slots = adam->CreateSlots(var.shape());
  std::mt19937_64 rng(3);
  for (int64_t step = 0; step < 5; ++step) {
    Tensor grads = RandomGrads(rows, d, &rng);
    ASSERT_TRUE(table.Apply(ids, grads, step).ok());
    ASSERT_TRUE(adam->Apply(0.1f, step, grads, &var, &slots).ok());
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < d; ++k) {
      EXPECT_EQ(table.Row(ids[r])[k], var[r * d + k]) << "row " << r << " element " << k;
      EXPECT_EQ(table.Slot(ids[r], 0)[k], slots.at("m")[r * d + k]);
      EXPECT_EQ(table.Slot(ids[r], 1)[k], slots.at("v")[r * d + k]);
    }
  }
}

TEST(SparseTableTest, LazyAdamDecaysMomentsOfTouchedRowsOnlyWithTheGlobalStepsCorrection) {
  const int64_t d = 2;
  SparseTableOptions options = Options(d);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  SparseTable table = Table(options, "{type: adam}");
  ASSERT_TRUE(table.Gather({1, 2}, 0).ok());
  const Tensor g0 = Tensor::FromVector(Shape{2, d}, {0.5f, -1.0f, 0.25f, 2.0f});
  ASSERT_TRUE(table.Apply({1, 2}, g0, 0).ok());
  const std::vector<float> row1 = RowOf(table, 1);
  const float m1 = table.Slot(1, 0)[0];
  // Step 3 touches row 2 only: row 1 keeps its value and moments.
  const Tensor g3 = Tensor::FromVector(Shape{1, d}, {-0.5f, 1.0f});
  ASSERT_TRUE(table.Apply({2}, g3, 3).ok());
  EXPECT_EQ(RowOf(table, 1), row1);
  EXPECT_EQ(table.Slot(1, 0)[0], m1);
  // Row 2 by the formula: two updates, at t = 1 and t = 4 (the global step + 1).
  for (int64_t k = 0; k < d; ++k) {
    double var = 0.0, m = 0.0, v = 0.0;
    const double grads[2] = {g0[d + k], g3[k]};
    const double t[2] = {1.0, 4.0};
    for (int u = 0; u < 2; ++u) {
      m = 0.9 * m + 0.1 * grads[u];
      v = 0.999 * v + 0.001 * grads[u] * grads[u];
      const double lr_t =
          0.1 * std::sqrt(1.0 - std::pow(0.999, t[u])) / (1.0 - std::pow(0.9, t[u]));
      var -= lr_t * m / (std::sqrt(v) + 1e-8);
    }
    EXPECT_NEAR(table.Row(2)[k], var, 1e-6) << "element " << k;
    EXPECT_NEAR(table.Slot(2, 0)[k], m, 1e-6);
  }
}

TEST(SparseTableTest, FtrlMatchesThePerCoordinateFormulaWithRepeatedIdsSummed) {
  const int64_t d = 3;
  SparseTableOptions options = Options(d);
  options.initializer = {RowInitializer::Kind::kUniform, 0.5f};
  SparseTable table = Table(options,
                            "{type: ftrl, l1_regularization_strength: 0.05, "
                            "l2_regularization_strength: 0.1}",
                            0.2);
  const std::vector<int64_t> all = {4, 9, 11};
  Tensor initial = table.Gather(all, 0).value();
  std::map<int64_t, std::vector<double>> var, accum, linear;
  for (size_t r = 0; r < all.size(); ++r) {
    var[all[r]] = std::vector<double>(initial.data() + r * d, initial.data() + (r + 1) * d);
    accum[all[r]] = std::vector<double>(d, 0.1);
    linear[all[r]] = std::vector<double>(d, 0.0);
  }
  std::mt19937_64 rng(5);
  const std::vector<std::vector<int64_t>> steps = {{4, 9, 4}, {11}, {9, 11, 9, 9}, {4, 11}};
  for (size_t step = 0; step < steps.size(); ++step) {
    const std::vector<int64_t>& ids = steps[step];
    Tensor grads = RandomGrads(static_cast<int64_t>(ids.size()), d, &rng);
    ASSERT_TRUE(table.Apply(ids, grads, static_cast<int64_t>(step)).ok());
    std::map<int64_t, std::vector<double>> summed;
    for (size_t i = 0; i < ids.size(); ++i) {
      summed[ids[i]].resize(d, 0.0);
      for (int64_t k = 0; k < d; ++k) summed[ids[i]][k] += grads[i * d + k];
    }
    for (const auto& [id, g] : summed) {
      for (int64_t k = 0; k < d; ++k) {
        const double a_new = accum[id][k] + g[k] * g[k];
        linear[id][k] += g[k] - (std::sqrt(a_new) - std::sqrt(accum[id][k])) / 0.2 * var[id][k];
        accum[id][k] = a_new;
        const double l = linear[id][k];
        var[id][k] = std::fabs(l) > 0.05
                         ? (std::copysign(0.05, l) - l) / (std::sqrt(a_new) / 0.2 + 0.2)
                         : 0.0;
      }
    }
  }
  for (int64_t id : all) {
    for (int64_t k = 0; k < d; ++k) {
      EXPECT_NEAR(table.Row(id)[k], var[id][k], 1e-5) << "id " << id << " element " << k;
      EXPECT_NEAR(table.Slot(id, 1)[k], linear[id][k], 1e-4) << "linear of id " << id;
    }
  }
}

TEST(SparseTableTest, AdagradUpdatesARepeatedIdOnceWithItsGradientsSummed) {
  SparseTableOptions options = Options(1);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  SparseTable table = Table(options, "{type: adagrad}");
  ASSERT_TRUE(table.Gather({7}, 0).ok());
  ASSERT_TRUE(table.Apply({7, 7}, Tensor::FromVector(Shape{2, 1}, {0.5f, 0.25f}), 0).ok());
  // One update with g = 0.75: accum = 0.1 + 0.5625; var = -0.1 * 0.75 / sqrt(0.6625).
  EXPECT_NEAR(table.Row(7)[0], -0.075 / std::sqrt(0.6625), 1e-7);
  EXPECT_NEAR(table.Slot(7, 0)[0], 0.6625, 1e-7);
}

TEST(SparseTableTest, SgdFollowsTheScheduleAndClipsEachStepsRowsByNorm) {
  SparseTableOptions options = Options(2);
  options.initializer.kind = RowInitializer::Kind::kZeros;
  ClippingOptions clipping;
  clipping.by_norm = 1.0f;
  clipping.by_global_norm = 1e-3f;  // the caller's: a table does not apply it
  SparseTable table(options, MustOptimizer("{type: sgd}"),
                    LearningRateSchedule::ExponentialDecay(0.5, 1, 0.5, true).value(), clipping);
  ASSERT_TRUE(table.Gather({1, 2}, 0).ok());
  // Rows [3, 0] and [0, 4]: norm 5, scaled by 1/5. Step 2: lr 0.5 * 0.25.
  ASSERT_TRUE(table.Apply({1, 2}, Tensor::FromVector(Shape{2, 2}, {3, 0, 0, 4}), 2).ok());
  EXPECT_NEAR(table.Row(1)[0], -0.125 * 0.6, 1e-7);
  EXPECT_NEAR(table.Row(2)[1], -0.125 * 0.8, 1e-7);
}

TEST(SparseTableTest, RowsStartFromTheSeedAndIdWhateverTheOrder) {
  SparseTable a = Table(Options(8), "{type: sgd}"), b = Table(Options(8), "{type: sgd}");
  ASSERT_TRUE(a.Gather({1, 2, 3}, 0).ok());
  ASSERT_TRUE(b.Gather({3}, 0).ok());
  ASSERT_TRUE(b.Gather({2, 1}, 5).ok());
  for (int64_t id : {1, 2, 3}) EXPECT_EQ(RowOf(a, id), RowOf(b, id)) << "id " << id;
  EXPECT_NE(RowOf(a, 1), RowOf(a, 2));
  SparseTableOptions other = Options(8);
  other.seed = 2;
  SparseTable c = Table(other, "{type: sgd}");
  ASSERT_TRUE(c.Gather({1}, 0).ok());
  EXPECT_NE(RowOf(a, 1), RowOf(c, 1));
}

TEST(SparseTableTest, NormalInitializerHasTheConfiguredScale) {
  SparseTableOptions options = Options(16, 100000);
  options.initializer = {RowInitializer::Kind::kNormal, 0.05f};
  SparseTable table = Table(options, "{type: sgd}");
  std::vector<int64_t> ids(2000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) * 1000003;
  Tensor rows = table.Gather(ids, 0).value();
  double sum = 0.0, squares = 0.0;
  for (int64_t i = 0; i < rows.size(); ++i) sum += rows[i], squares += rows[i] * rows[i];
  const double mean = sum / rows.size(), stddev = std::sqrt(squares / rows.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(stddev, 0.05, 0.002);
}

TEST(SparseTableTest, AnIdGetsARowOnlyAfterMinCountGathers) {
  SparseTableOptions options = Options(4);
  options.min_count = 3;
  SparseTable table = Table(options, "{type: sgd}");
  Tensor first = table.Gather({5, 5}, 0).value();
  EXPECT_FALSE(table.Contains(5));
  for (int64_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], 0.0f);
  ASSERT_TRUE(table.Apply({5}, Tensor::Filled(Shape{1, 4}, 1.0f), 0).ok());  // dropped
  EXPECT_FALSE(table.Contains(5));
  Tensor third = table.Gather({5}, 1).value();
  ASSERT_TRUE(table.Contains(5));
  SparseTable admits_all = Table(Options(4), "{type: sgd}");
  ASSERT_TRUE(admits_all.Gather({5}, 0).ok());
  EXPECT_EQ(third.ToVector(), RowOf(admits_all, 5));  // the fresh initial row
  EXPECT_EQ(table.rows(), 1);
}

TEST(SparseTableTest, RowsUntouchedForEvictAfterStepsAreDroppedAndComeBackFresh) {
  SparseTableOptions options = Options(2);
  options.evict_after_steps = 10;
  SparseTable table = Table(options, "{type: sgd}");
  const std::vector<float> fresh = table.Gather({1}, 0).value().ToVector();
  ASSERT_TRUE(table.Apply({1}, Tensor::Filled(Shape{1, 2}, 1.0f), 0).ok());
  ASSERT_TRUE(table.Gather({2}, 3).ok());
  ASSERT_TRUE(table.Apply({2}, Tensor::Filled(Shape{1, 2}, 1.0f), 8).ok());  // touches row 2
  EXPECT_EQ(table.Evict(9), 0);
  EXPECT_EQ(table.Evict(10), 1);
  EXPECT_FALSE(table.Contains(1));
  EXPECT_TRUE(table.Contains(2));
  EXPECT_EQ(table.Gather({1}, 11).value().ToVector(), fresh);
  EXPECT_EQ(table.rows(), 2);
}

TEST(SparseTableTest, AGatherPastMaxRowsFailsNamingTheTableAndChangesNothing) {
  SparseTable table = Table(Options(2, 3), "{type: sgd}");
  ASSERT_TRUE(table.Gather({0, 1}, 0).ok());
  auto full = table.Gather({1, 2, 3}, 1);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("table 'C1' is full"), std::string::npos)
      << full.status().ToString();
  EXPECT_NE(full.status().message().find("max_rows 3"), std::string::npos);
  EXPECT_EQ(table.rows(), 2);
  EXPECT_FALSE(table.Contains(2));
  EXPECT_TRUE(table.Gather({2, 0}, 2).ok());  // exactly at the cap
}

TEST(SparseTableTest, BadIdsAndGradientsAreRefusedChangingNothing) {
  SparseTable table = Table(Options(2), "{type: adam}");
  ASSERT_TRUE(table.Gather({1}, 0).ok());
  const std::vector<float> before = RowOf(table, 1);
  auto negative = table.Gather({1, -4}, 1);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("id -4 at position 1 is negative"), std::string::npos)
      << negative.status().ToString();
  Status shape = table.Apply({1}, Tensor(Shape{2, 2}), 1);
  EXPECT_NE(shape.message().find("gradient has shape [2,2], expected [1,2]"), std::string::npos)
      << shape.ToString();
  Status nan = table.Apply({1}, Tensor::FromVector(Shape{1, 2}, {0.5f, NAN}), 1);
  EXPECT_NE(nan.message().find("gradient of id 1 is not finite"), std::string::npos)
      << nan.ToString();
  Status beyond =
      table.Apply({1, 1}, Tensor::Filled(Shape{2, 2}, Optimizer::kSquaredGradientBound), 1);
  EXPECT_NE(beyond.message().find("beyond the adam optimizer's bound"), std::string::npos)
      << beyond.ToString();
  EXPECT_EQ(RowOf(table, 1), before);
  EXPECT_EQ(table.Slot(1, 0)[0], 0.0f);
}

TEST(SparseTableTest, ConfigErrorsNameTheField) {
  auto parse = [](const std::string& yaml) {
    auto root = ConfigNode::Parse("table: " + yaml, "model.yaml");
    EXPECT_TRUE(root.ok());
    auto options = SparseTableOptions::FromConfig(root->Child("table").value());
    return options.ok() ? std::string("OK") : options.status().ToString();
  };
  EXPECT_EQ(parse("{name: C1, dimension: 8, max_rows: 100, min_count: 2, evict_after_steps: 5, "
                  "initializer: {type: uniform, scale: 0.1}, seed: 3}"),
            "OK");
  EXPECT_NE(parse("{name: C1, dimension: 0, max_rows: 100}")
                .find("table 'C1': field 'dimension' must be > 0, got 0"),
            std::string::npos);
  EXPECT_NE(parse("{name: C1, dimension: 8}").find("max_rows"), std::string::npos);
  EXPECT_NE(parse("{name: C1, dimension: 8, max_rows: 10, min_count: 0}")
                .find("field 'min_count' must be >= 1"),
            std::string::npos);
  EXPECT_NE(parse("{name: C1, dimension: 8, max_rows: 10, initializer: {type: ones}}")
                .find("must be zeros, uniform or normal, got 'ones'"),
            std::string::npos);
  EXPECT_NE(parse("{name: C1, dimension: 8, max_rows: 10, rows: 3}").find("'rows'"),
            std::string::npos);
  EXPECT_NE(parse("{name: C1, dimension: 0, max_rows: 100}").find("model.yaml"), std::string::npos);
}

// An export writes the rows no batch touched at the value a first touch would give them: that
// value, for each initializer, is the row Gather creates, and asking for it creates nothing.
TEST(SparseTableTest, FirstTouchRowIsTheRowGatherCreatesAndCreatesNothing) {
  for (RowInitializer::Kind kind : {RowInitializer::Kind::kZeros, RowInitializer::Kind::kUniform,
                                    RowInitializer::Kind::kNormal}) {
    SparseTableOptions o = Options(5);
    o.initializer = {kind, 0.5f};
    o.seed = 11;
    SparseTable table = Table(o, "{type: sgd}");
    const std::vector<int64_t> ids = {0, 3, 99};
    std::vector<std::vector<float>> first(ids.size(), std::vector<float>(5, -7.0f));
    for (size_t j = 0; j < ids.size(); ++j) table.FirstTouchRow(ids[j], first[j].data());
    EXPECT_EQ(table.rows(), 0);
    ASSERT_TRUE(table.Gather(ids, 1).ok());
    for (size_t j = 0; j < ids.size(); ++j) EXPECT_EQ(RowOf(table, ids[j]), first[j]) << ids[j];
    if (kind != RowInitializer::Kind::kZeros) {
      EXPECT_NE(RowOf(table, 3), RowOf(table, 99));
    }
  }
}

}  // namespace
}  // namespace pstrain::ps
