// WatchSignals: a watched signal sets its flag and interrupts no other thread.
#include "common/signal_watch.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>

namespace pstrain {
namespace {

bool BlockedHere(int signal) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, signal) == 1;
}

TEST(SignalWatchTest, ASignalStormInterruptsNoPollAndSetsTheFlag) {
  EXPECT_FALSE(SignalReceived(SIGUSR1));
  ASSERT_TRUE(WatchSignals({SIGUSR1}).ok());
  EXPECT_TRUE(BlockedHere(SIGUSR1));

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int rc = -2, error = 0;
  bool blocked_in_thread = false;
  std::thread poller([&] {
    blocked_in_thread = BlockedHere(SIGUSR1);
    pollfd p{fds[0], POLLIN, 0};
    rc = poll(&p, 1, 500);  // nothing is ever written: a clean wait times out (0)
    error = errno;
  });
  // Process-directed signals: the kernel may pick any thread that has them unblocked. A
  // handler run on the poller would make poll fail with EINTR.
  for (int i = 0; i < 300; ++i) {
    kill(getpid(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  poller.join();
  close(fds[0]);
  close(fds[1]);
  EXPECT_TRUE(blocked_in_thread) << "a thread started after WatchSignals inherits the mask";
  EXPECT_EQ(rc, 0) << "poll was interrupted (errno " << error << ")";
  EXPECT_TRUE(SignalReceived(SIGUSR1));
  EXPECT_FALSE(SignalReceived(SIGUSR2));
}

TEST(SignalWatchTest, WatchingTwiceIsHarmlessAndABadSignalIsRefused) {
  ASSERT_TRUE(WatchSignals({SIGUSR2}).ok());
  ASSERT_TRUE(WatchSignals({SIGUSR2}).ok());
  kill(getpid(), SIGUSR2);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!SignalReceived(SIGUSR2) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(SignalReceived(SIGUSR2));
  const Status bad = WatchSignals({0});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("signal 0"), std::string::npos) << bad.ToString();
}

}  // namespace
}  // namespace pstrain
