#include "worker/training/progress_line.h"

#include <algorithm>
#include <cstdio>

namespace pstrain {
namespace worker {

std::string FormatProgressLine(const ProgressLine& p) {
  char line[256];
  std::snprintf(line, sizeof(line), "step %lld/%lld (epoch %.2f) loss %.4f lr %.4f %.1f examples/s",
                static_cast<long long>(std::min(p.step, p.max_steps)),
                static_cast<long long>(p.max_steps), p.epoch, p.loss, p.learning_rate,
                p.examples_per_sec);
  std::string out = line;
  if (p.staleness) {
    std::snprintf(line, sizeof(line), " staleness %.2f", *p.staleness);
    out += line;
  }
  if (p.dropped) out += " dropped " + std::to_string(*p.dropped);
  return out;
}

}  // namespace worker
}  // namespace pstrain
