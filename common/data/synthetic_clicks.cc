#include "common/data/synthetic_clicks.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pstrain {

Status SyntheticClickOptions::Validate() const {
  if (dense < 1) return InvalidArgument("--dense must be >= 1, got " + std::to_string(dense));
  if (categorical < 1) {
    return InvalidArgument("--categorical must be >= 1, got " + std::to_string(categorical));
  }
  if (vocabulary < 1 || vocabulary > 100000000) {
    return InvalidArgument("--vocabulary must be in [1, 1e8], got " + std::to_string(vocabulary));
  }
  if (!(zipf_exponent > 0.0 && std::isfinite(zipf_exponent))) {
    return InvalidArgument("--zipf_exponent must be > 0, got " + std::to_string(zipf_exponent));
  }
  if (!(dense_weight_stddev >= 0.0 && id_weight_stddev >= 0.0 && std::isfinite(bias))) {
    return InvalidArgument(
        "--dense_weight_stddev and --id_weight_stddev must be >= 0, --bias finite");
  }
  return Status::OK();
}

SyntheticClicks::SyntheticClicks(const SyntheticClickOptions& options)
    : options_(options), rng_(options.seed) {
  CHECK(options_.Validate().ok()) << options_.Validate().ToString();
  double total = 0.0;
  for (int64_t r = 0; r < options_.vocabulary; ++r) {
    total += std::pow(static_cast<double>(r + 1), -options_.zipf_exponent);
    rank_cdf_.push_back(total);
  }
  for (double& c : rank_cdf_) c /= total;
  std::normal_distribution<double> dense(0.0, options_.dense_weight_stddev);
  for (int64_t j = 0; j < options_.dense; ++j) dense_weights_.push_back(dense(rng_));
  std::normal_distribution<double> id(0.0, options_.id_weight_stddev);
  id_weights_.resize(options_.categorical);
  for (auto& weights : id_weights_) {
    for (int64_t r = 0; r < options_.vocabulary; ++r) weights.push_back(id(rng_));
  }
}

FeatureSchema SyntheticClicks::Schema() const {
  FeatureSchema schema;
  schema.features.push_back({"dense", FeatureSpec::Kind::kFloats, options_.dense, 0});
  for (int64_t f = 0; f < options_.categorical; ++f) {
    schema.features.push_back({"C" + std::to_string(f + 1), FeatureSpec::Kind::kIds, 1, 0});
  }
  return schema;
}

int64_t SyntheticClicks::IdOf(int64_t feature, int64_t rank) {
  // Distinct per (feature, rank) and spread over the positive int64s, so that readers must hash.
  return (feature << 40) + rank * 7919 + 1000003;
}

FeatureExample SyntheticClicks::Next(double* probability) {
  FeatureExample e;
  e.floats.resize(1 + options_.categorical);
  e.ids.resize(1 + options_.categorical);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double logit = options_.bias;
  for (int64_t j = 0; j < options_.dense; ++j) {
    const float x = static_cast<float>(normal(rng_));
    e.floats[0].push_back(x);
    logit += dense_weights_[j] * x;
  }
  for (int64_t f = 0; f < options_.categorical; ++f) {
    const double u = unit(rng_);
    const int64_t rank = std::min<int64_t>(
        std::lower_bound(rank_cdf_.begin(), rank_cdf_.end(), u) - rank_cdf_.begin(),
        options_.vocabulary - 1);
    e.ids[1 + f].push_back(IdOf(f, rank));
    logit += id_weights_[f][rank];
  }
  *probability = 1.0 / (1.0 + std::exp(-logit));
  e.label = unit(rng_) < *probability ? 1 : 0;
  return e;
}

}  // namespace pstrain
