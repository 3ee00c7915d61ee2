#include "common/checkpoint/save_trigger.h"

#include <gtest/gtest.h>

namespace pstrain {
namespace {

using Clock = SaveTrigger::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(SaveTrigger, SavesEveryNStepsFromTheRestoredStep) {
  const Clock::time_point t0 = Clock::now();
  SaveTrigger trigger(SavePolicy{100, 0}, /*start_step=*/200, t0);
  std::vector<int64_t> saved;
  for (int64_t step = 201; step <= 500; ++step) {
    if (trigger.ShouldSave(step, t0 + seconds(3600))) saved.push_back(step);
  }
  EXPECT_EQ(saved, (std::vector<int64_t>{300, 400, 500}));
}

TEST(SaveTrigger, SavesEveryNSecondsRegardlessOfSteps) {
  const Clock::time_point t0 = Clock::now();
  SaveTrigger trigger(SavePolicy{0, 60}, 0, t0);
  EXPECT_FALSE(trigger.ShouldSave(1, t0 + seconds(59)));
  EXPECT_TRUE(trigger.ShouldSave(2, t0 + seconds(60)));
  EXPECT_FALSE(trigger.ShouldSave(100000, t0 + seconds(119)));
  EXPECT_TRUE(trigger.ShouldSave(100001, t0 + seconds(120) + milliseconds(1)));
}

TEST(SaveTrigger, WhicheverComesFirstSavesAndRestartsBothCounts) {
  const Clock::time_point t0 = Clock::now();
  SaveTrigger trigger(SavePolicy{100, 60}, 0, t0);
  EXPECT_TRUE(trigger.ShouldSave(100, t0 + seconds(10)));   // by steps
  EXPECT_FALSE(trigger.ShouldSave(150, t0 + seconds(69)));  // 59 s since the last save
  EXPECT_TRUE(trigger.ShouldSave(151, t0 + seconds(70)));   // by time
  EXPECT_FALSE(trigger.ShouldSave(250, t0 + seconds(71)));  // 99 steps since the last save
  EXPECT_TRUE(trigger.ShouldSave(251, t0 + seconds(72)));
}

TEST(SaveTrigger, NeverSavesTwiceAtOneStepOrWhenDisabled) {
  const Clock::time_point t0 = Clock::now();
  SaveTrigger timed(SavePolicy{0, 1}, 7, t0);
  EXPECT_FALSE(timed.ShouldSave(7, t0 + seconds(10)));  // nothing trained since the restore
  SaveTrigger off(SavePolicy{}, 0, t0);
  EXPECT_FALSE(off.ShouldSave(1000000, t0 + seconds(100000)));
}

}  // namespace
}  // namespace pstrain
