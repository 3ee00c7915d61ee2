#include "worker/distributed/worker_metrics.h"

namespace pstrain {
namespace worker {

void WorkerMetrics::AddStep(Clock::duration input, Clock::duration compute,
                            Clock::duration exchange, int64_t examples, int64_t staleness) {
  input_ += input;
  compute_ += compute;
  exchange_ += exchange;
  examples_ += examples;
  staleness_ += staleness;
  ++steps_;
}

void WorkerMetrics::Write(SummaryWriter* log, int64_t step) {
  using Ms = std::chrono::duration<double, std::milli>;
  const double wall = std::chrono::duration<double>(Clock::now() - start_).count();
  if (steps_ > 0 && log != nullptr) {
    const double input = Ms(input_).count() / steps_, compute = Ms(compute_).count() / steps_,
                 exchange = Ms(exchange_).count() / steps_;
    const double busy = input + compute + exchange;
    log->AddScalar("worker/examples_per_sec", step,
                   static_cast<float>(wall > 0 ? examples_ / wall : 0.0));
    log->AddScalar("worker/input_ms", step, static_cast<float>(input));
    log->AddScalar("worker/compute_ms", step, static_cast<float>(compute));
    log->AddScalar("worker/exchange_ms", step, static_cast<float>(exchange));
    log->AddScalar("worker/exchange_fraction", step,
                   static_cast<float>(busy > 0 ? exchange / busy : 0.0));
    log->AddScalar("worker/staleness", step, static_cast<float>(staleness_) / steps_);
  }
  *this = WorkerMetrics();
}

}  // namespace worker
}  // namespace pstrain
