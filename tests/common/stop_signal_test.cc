#include "common/stop_signal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(StopSignalTest, StopWakesAWaitAtOnceInsteadOfAtTheEndOfItsInterval) {
  StopSignal stop;
  bool woke_stopped = false;
  const auto start = steady_clock::now();
  std::thread waiter([&] { woke_stopped = stop.WaitFor(std::chrono::seconds(60)); });
  std::this_thread::sleep_for(milliseconds(20));
  stop.Stop();
  waiter.join();
  EXPECT_TRUE(woke_stopped);
  EXPECT_TRUE(stop.stopped());
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(StopSignalTest, AWaitWithoutStopEndsAfterItsIntervalNotStopped) {
  StopSignal stop;
  const auto start = steady_clock::now();
  EXPECT_FALSE(stop.WaitFor(milliseconds(30)));
  EXPECT_GE(steady_clock::now() - start, milliseconds(30));
  EXPECT_FALSE(stop.stopped());
}

TEST(StopSignalTest, AWaitAfterStopReturnsAtOnce) {
  StopSignal stop;
  stop.Stop();
  const auto start = steady_clock::now();
  EXPECT_TRUE(stop.WaitFor(std::chrono::seconds(60)));
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace pstrain
