#include "worker/distributed/step_timeline.h"

#include <glog/logging.h>

#include <cstdio>

namespace pstrain {
namespace worker {

void StepTimeline::Begin(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  start_ = std::chrono::steady_clock::now();
  events_.clear();
}

void StepTimeline::Note(const char* kind, const std::string& what) {
  if (!VLOG_IS_ON(1)) return;  // nothing to keep when nobody reads it
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({kind, what, std::chrono::steady_clock::now() - start_});
}

std::string StepTimeline::ToString() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string line = "step " + std::to_string(step_) + " timeline (ms from the step's start):";
  for (size_t i = 0; i < events_.size(); ++i) {
    char ms[32];
    std::snprintf(ms, sizeof(ms), "%.2f",
                  std::chrono::duration<double, std::milli>(events_[i].at).count());
    line += std::string(i ? ", " : " ") + events_[i].kind + " " + events_[i].what + " " + ms;
  }
  return line;
}

void StepTimeline::Log(const std::string& who) const { VLOG(1) << who << ": " << ToString(); }

}  // namespace worker
}  // namespace pstrain
