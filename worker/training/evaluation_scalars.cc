#include "worker/training/evaluation_scalars.h"

namespace pstrain {
namespace worker {

void AddEvaluationScalars(const Evaluation& e, int64_t step, SummaryWriter* log) {
  log->AddScalar("accuracy", step, static_cast<float>(e.accuracy));
  log->AddScalar("loss", step, static_cast<float>(e.loss));
  if (e.auc >= 0) {
    log->AddScalar("auc", step, static_cast<float>(e.auc));
    log->AddScalar("log_loss", step, static_cast<float>(e.log_loss));
  }
}

}  // namespace worker
}  // namespace pstrain
