// Signals as flags, delivered to a thread of their own.
//
// A signal handler runs on whichever thread the kernel picks, in the middle of whatever that
// thread was doing: a blocking ZeroMQ call then fails with EINTR, and a oneDNN kernel taking a
// SIGTERM mid-GEMM was seen to corrupt the heap (glibc's "corrupted size vs. prev_size" when
// the launcher's remove-worker stopped a worker). WatchSignals installs a handler that only
// sets a flag, blocks the signals in the calling thread, which every thread started after it
// inherits, and starts one thread that sleeps with them unblocked: the kernel delivers them
// there and nowhere else. Call it before any other thread starts (first thing in main or in the
// role), since a thread started before keeps its own mask.
#pragma once

#include <initializer_list>

#include "common/status.h"

namespace pstrain {

// Watches `signals` (each at most once per process; watching one again is a no-op).
Status WatchSignals(std::initializer_list<int> signals);
// Whether `signal` came since WatchSignals; false for a signal not watched.
bool SignalReceived(int signal);

}  // namespace pstrain
