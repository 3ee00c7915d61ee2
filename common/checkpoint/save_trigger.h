// When to save: every N steps and/or every N seconds, whichever comes first, counted from the
// last save (TF's CheckpointSaverHook save_steps / save_secs).
#pragma once

#include <chrono>
#include <cstdint>

namespace pstrain {

struct SavePolicy {
  int64_t every_steps = 0;   // 0: not by steps
  double every_seconds = 0;  // 0: not by time
};

class SaveTrigger {
 public:
  using Clock = std::chrono::steady_clock;

  // Counting starts at `start_step` (the restored global step) and `start`.
  SaveTrigger(SavePolicy policy, int64_t start_step, Clock::time_point start)
      : policy_(policy), last_step_(start_step), last_time_(start) {}

  // True when a save is due; the trigger then counts from (step, now), so the caller saves
  // whenever this returns true.
  bool ShouldSave(int64_t step, Clock::time_point now);

 private:
  SavePolicy policy_;
  int64_t last_step_;
  Clock::time_point last_time_;
};

}  // namespace pstrain
