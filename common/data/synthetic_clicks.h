// A click log drawn from a known model, so that a trained model can be judged against the best
// any model could do: dense features ~ N(0, 1), categorical ids drawn from a Zipf law (a few ids
// are most of the traffic, as in real logs), and a click with probability
//   sigmoid(bias + sum_j w_j x_j + sum_f v_f[id_f])
// where the weights w and v are drawn once from the seed. The probability itself is returned with
// each example: the Bayes-optimal AUC and log loss of a sample are those of these probabilities.
// Examples have FeatureSchema's shape: one float feature "dense" and int64 features "C1".."Cn".
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/data/feature_example.h"

namespace pstrain {

struct SyntheticClickOptions {
  int64_t dense = 13;
  int64_t categorical = 26;
  int64_t vocabulary = 10000;  // distinct ids per categorical feature
  double zipf_exponent = 1.1;  // > 0: id rank r is drawn with probability ~ 1 / (r + 1)^exponent
  double bias = -1.5;
  double dense_weight_stddev = 0.3;
  double id_weight_stddev = 0.5;
  uint64_t seed = 1;

  Status Validate() const;  // errors name the flag
};

class SyntheticClicks {
 public:
  explicit SyntheticClicks(const SyntheticClickOptions& options);

  // The features' schema as a config would give it (ids unhashed, one per feature).
  FeatureSchema Schema() const;
  // The next example and the hidden model's click probability for it.
  FeatureExample Next(double* probability);
  // The id feature `f` (0-based) takes for Zipf rank `rank`: a large positive int64, distinct per
  // (feature, rank).
  static int64_t IdOf(int64_t feature, int64_t rank);

 private:
  SyntheticClickOptions options_;
  std::mt19937_64 rng_;
  std::vector<double> rank_cdf_;  // cumulative Zipf probabilities of ranks 0..vocabulary-1
  std::vector<double> dense_weights_;
  std::vector<std::vector<double>> id_weights_;  // [feature][rank]
};

}  // namespace pstrain
