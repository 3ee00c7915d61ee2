#include "common/checkpoint/save_trigger.h"

namespace pstrain {

bool SaveTrigger::ShouldSave(int64_t step, Clock::time_point now) {
  // Nothing changed since the last save (or the restore), as TF's SecondOrStepTimer decides.
  if (step == last_step_) return false;
  bool by_steps = policy_.every_steps > 0 && step - last_step_ >= policy_.every_steps;
  bool by_time = policy_.every_seconds > 0 &&
                 std::chrono::duration<double>(now - last_time_).count() >= policy_.every_seconds;
  if (!by_steps && !by_time) return false;
  last_step_ = step;
  last_time_ = now;
  return true;
}

}  // namespace pstrain
