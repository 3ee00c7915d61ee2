// Loss and throughput over a window of steps, for progress lines and TensorBoard.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/summary/summary_writer.h"

namespace pstrain {
namespace worker {

// Loss, steps and examples since the last progress line, and the rates over that time.
class ProgressWindow {
 public:
  using Clock = std::chrono::steady_clock;
  struct Report {
    int64_t steps = 0;
    double mean_loss = 0, examples_per_sec = 0, steps_per_sec = 0;
  };
  void Add(float loss, int64_t examples) {
    loss_ += loss;
    ++steps_;
    examples_ += examples;
  }
  // Time spent elsewhere (evaluation) is not training time: keep it out of the rates.
  void Exclude(Clock::duration d) { start_ += d; }
  // The window's figures; starts the next window.
  Report Take();

 private:
  Clock::time_point start_ = Clock::now();
  int64_t steps_ = 0, examples_ = 0;
  double loss_ = 0;
};

// The scalars every trainer writes for a progress window: loss, learning rate, examples/s and
// global_step/sec.
void WriteProgressScalars(SummaryWriter* log, int64_t step, float learning_rate,
                          const ProgressWindow::Report& report);

}  // namespace worker
}  // namespace pstrain
