#include "worker/training/progress_window.h"

#include <algorithm>

namespace pstrain {
namespace worker {

ProgressWindow::Report ProgressWindow::Take() {
  const double secs = std::max(std::chrono::duration<double>(Clock::now() - start_).count(), 1e-9);
  Report r;
  r.steps = steps_;
  r.mean_loss = steps_ ? loss_ / steps_ : 0.0;
  r.examples_per_sec = examples_ / secs;
  r.steps_per_sec = steps_ / secs;
  start_ = Clock::now();
  steps_ = examples_ = 0;
  loss_ = 0;
  return r;
}

void WriteProgressScalars(SummaryWriter* log, int64_t step, float learning_rate,
                          const ProgressWindow::Report& report) {
  log->AddScalar("loss", step, static_cast<float>(report.mean_loss));
  log->AddScalar("learning_rate", step, learning_rate);
  log->AddScalar("examples_per_sec", step, static_cast<float>(report.examples_per_sec));
  log->AddScalar("global_step/sec", step, static_cast<float>(report.steps_per_sec));
}

}  // namespace worker
}  // namespace pstrain
