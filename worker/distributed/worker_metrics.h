// Each worker's own TensorBoard run (<logdir>/worker-<task>), beside the servers' (ps-<task>)
// and the chief's train/: where a worker's time goes, so that a slow worker or a step bound by
// the exchange rather than the compute shows up side by side with the others.
//
//   worker/examples_per_sec   this worker's examples over the window's wall time
//   worker/input_ms           mean per step: waiting for the input pipeline's batch
//   worker/compute_ms         mean per step: stages 1-2 (forward, backward) as the host sees them
//                             (on a GPU, the time to queue the kernels; waiting for them lands
//                             in exchange_ms)
//   worker/exchange_ms        mean per step: stages 3-6 (to the host, host average, push and
//                             pull, upload): the time the worker waits on the network
//   worker/exchange_fraction  exchange over input + compute + exchange
//   worker/staleness          mean steps other workers applied between its pull and its push
#pragma once

#include <chrono>
#include <cstdint>

#include "common/summary/summary_writer.h"

namespace pstrain {
namespace worker {

class WorkerMetrics {
 public:
  using Clock = std::chrono::steady_clock;
  void AddStep(Clock::duration input, Clock::duration compute, Clock::duration exchange,
               int64_t examples, int64_t staleness);
  // Writes the window's scalars at global step `step` and starts the next window.
  void Write(SummaryWriter* log, int64_t step);

 private:
  Clock::time_point start_ = Clock::now();
  Clock::duration input_{}, compute_{}, exchange_{};
  int64_t steps_ = 0, examples_ = 0, staleness_ = 0;
};

}  // namespace worker
}  // namespace pstrain
