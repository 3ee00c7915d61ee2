// Metrics of a binary classifier (click or no click) from its predicted probabilities: the area
// under the ROC curve, which ranks, and the log loss, which also judges calibration. Shared by
// the trainer's evaluation and pstrain-synth-ctr, which reports the best values a synthetic log
// allows so that a run can be judged against them.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace pstrain {

// The probability that a random positive scores above a random negative, ties counting half
// (the Mann-Whitney statistic, as sklearn's roc_auc_score). Needs both classes and labels of 0
// or 1; errors say which is wrong.
Result<double> RocAuc(const std::vector<double>& scores, const std::vector<int32_t>& labels);

// The mean of -log p(label), with p clipped to [1e-7, 1 - 1e-7] as Keras clips it.
double LogLoss(const std::vector<double>& probabilities, const std::vector<int32_t>& labels);

}  // namespace pstrain
