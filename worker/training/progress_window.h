// Loss and throughput over a window of steps, for progress lines and TensorBoard, and when the
// next line is due: every N steps, and also every N seconds when steps are slow or the global
// step runs ahead of the local one (TF's LoggingTensorHook: every_n_iter, every_n_secs), so that
// a reader of the lines (the launcher's progress, progress.py) sees the step move smoothly.
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
  // Training time since the window started.
  Clock::duration Elapsed() const { return Clock::now() - start_; }

 private:
  Clock::time_point start_ = Clock::now();
  int64_t steps_ = 0, examples_ = 0;
  double loss_ = 0;
};

struct ProgressSchedule {
  int64_t every_n_steps = 100;
  double every_n_secs = 0;  // 0: by steps only
  // Whether a line is due after `steps` steps, `open` the current window's training time.
  bool Due(int64_t steps, ProgressWindow::Clock::duration open) const {
    return steps % every_n_steps == 0 ||
           (every_n_secs > 0 && std::chrono::duration<double>(open).count() >= every_n_secs);
  }
};

// The scalars every trainer writes for a progress window: loss, learning rate, examples/s and
// global_step/sec.
void WriteProgressScalars(SummaryWriter* log, int64_t step, float learning_rate,
                          const ProgressWindow::Report& report);

}  // namespace worker
}  // namespace pstrain
