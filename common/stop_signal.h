// A thread's "stop now", for a loop that sleeps between rounds: Stop wakes a sleeping WaitFor at
// once, so that the owner's destructor joins the thread without waiting out its interval. The
// flag alone (an atomic) would leave the thread asleep until the interval ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace pstrain {

class StopSignal {
 public:
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    changed_.notify_all();
  }

  // Sleeps for `interval` or until Stop, whichever is first; true once stopped.
  template <typename Rep, typename Period>
  bool WaitFor(std::chrono::duration<Rep, Period> interval) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, interval, [&] { return stopped_; });
  }

  bool stopped() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopped_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopped_ = false;
};

}  // namespace pstrain
