#include "common/signal_watch.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace pstrain {

namespace {

constexpr int kMaxSignal = 65;
std::atomic<bool> g_received[kMaxSignal];
std::mutex g_mu;
sigset_t g_watched;  // under g_mu
bool g_initialised = false;

void OnSignal(int signal) {
  if (signal > 0 && signal < kMaxSignal) g_received[signal].store(true);
}

// The one thread with the watched signals unblocked: it only sleeps, so a handler interrupts
// nothing. sigsuspend returns after each handler; the loop sleeps again.
void Sleep(sigset_t unblocked) {
  while (true) sigsuspend(&unblocked);
}

}  // namespace

Status WatchSignals(std::initializer_list<int> signals) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_initialised) {
    sigemptyset(&g_watched);
    g_initialised = true;
  }
  sigset_t added;
  sigemptyset(&added);
  for (int s : signals) {
    if (s <= 0 || s >= kMaxSignal) {
      return InvalidArgument("signal " + std::to_string(s) + " cannot be watched");
    }
    if (sigismember(&g_watched, s)) continue;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(s, &action, nullptr) != 0) {
      return Internal("sigaction(" + std::string(strsignal(s)) + "): " + std::strerror(errno));
    }
    sigaddset(&g_watched, s);
    sigaddset(&added, s);
  }
  if (sigisemptyset(&added)) return Status::OK();
  if (const int rc = pthread_sigmask(SIG_BLOCK, &added, nullptr); rc != 0) {
    return Internal(std::string("pthread_sigmask: ") + std::strerror(rc));
  }
  // The new thread inherits the mask just set; it sleeps with every signal but the watched
  // ones blocked as they were, and the watched ones open.
  sigset_t unblocked;
  pthread_sigmask(SIG_BLOCK, nullptr, &unblocked);
  for (int s = 1; s < kMaxSignal; ++s) {
    if (sigismember(&g_watched, s)) sigdelset(&unblocked, s);
  }
  std::thread(Sleep, unblocked).detach();
  return Status::OK();
}

bool SignalReceived(int signal) {
  return signal > 0 && signal < kMaxSignal && g_received[signal].load();
}

}  // namespace pstrain
