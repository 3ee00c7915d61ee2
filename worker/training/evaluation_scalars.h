// An evaluation's TensorBoard scalars, as the trainer and the evaluator role both write them to
// their eval/ run, so that the two runs' charts carry the same tags.
#pragma once

#include <cstdint>

#include "common/summary/summary_writer.h"
#include "worker/training/evaluation.h"

namespace pstrain {
namespace worker {

// accuracy and loss; auc and log_loss where the model has two classes.
void AddEvaluationScalars(const Evaluation& e, int64_t step, SummaryWriter* log);

}  // namespace worker
}  // namespace pstrain
