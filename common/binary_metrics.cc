#include "common/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace pstrain {

Result<double> RocAuc(const std::vector<double>& scores, const std::vector<int32_t>& labels) {
  if (scores.size() != labels.size()) {
    return InvalidArgument("AUC: " + std::to_string(scores.size()) + " scores but " +
                           std::to_string(labels.size()) + " labels");
  }
  int64_t positives = 0;
  for (int32_t y : labels) {
    if (y != 0 && y != 1)
      return InvalidArgument("AUC: label " + std::to_string(y) + " is not 0 or 1");
    positives += y;
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  const int64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) {
    return InvalidArgument("AUC needs positive and negative examples, got " +
                           std::to_string(positives) + " and " + std::to_string(negatives));
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // Sum of the positives' ranks (1-based), tied scores sharing their mean rank.
  double positive_ranks = 0.0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (int64_t k = i; k < j; ++k) positive_ranks += labels[order[k]] * mean_rank;
    i = j;
  }
  const double p = static_cast<double>(positives);
  return (positive_ranks - p * (p + 1.0) / 2.0) / (p * static_cast<double>(negatives));
}

double LogLoss(const std::vector<double>& probabilities, const std::vector<int32_t>& labels) {
  double sum = 0.0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double p = std::clamp(probabilities[i], 1e-7, 1.0 - 1e-7);
    sum -= labels[i] ? std::log(p) : std::log(1.0 - p);
  }
  return labels.empty() ? 0.0 : sum / static_cast<double>(labels.size());
}

}  // namespace pstrain
