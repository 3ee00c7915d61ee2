// The progress line every trainer logs (pstrain-train's "trainer: ...", a worker's "worker 1:
// ..."). It is a contract: the launcher reads these lines back (launcher/pstrain_launch/
// progress.py, _STEP names FormatProgressLine) for its cluster-wide progress and ETA, and
// tests/launcher/test_progress_contract.py feeds it the real binary's output. Change both ends
// together.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pstrain {
namespace worker {

struct ProgressLine {
  int64_t step = 0;       // the global step; shown as at most max_steps
  int64_t max_steps = 0;  // the run's total
  double epoch = 0;
  double loss = 0;
  double learning_rate = 0;
  double examples_per_sec = 0;
  std::optional<double> staleness;  // a cluster worker's: mean updates it lagged behind
  std::optional<int64_t> dropped;   // a cluster worker's: its pushes dropped as stale
};

// "step 300/1872 (epoch 0.64) loss 0.3671 lr 0.0010 1649.3 examples/s[ staleness 1.00
// dropped 0]". Async workers may carry the global step past the total by the updates in flight;
// the line never shows more than the total.
std::string FormatProgressLine(const ProgressLine& p);

}  // namespace worker
}  // namespace pstrain
