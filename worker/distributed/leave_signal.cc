#include "worker/distributed/leave_signal.h"

#include <glog/logging.h>

#include <csignal>

#include "common/signal_watch.h"

namespace pstrain {
namespace worker {

namespace {
bool g_left = false;
}  // namespace

void LeaveOnSigterm() {
  const Status watched = WatchSignals({SIGTERM});
  LOG_IF(WARNING, !watched.ok()) << "SIGTERM will stop this worker without leaving cleanly: "
                                 << watched.ToString();
}
bool LeaveRequested() { return SignalReceived(SIGTERM); }
void MarkLeftOnSigterm() { g_left = true; }
bool LeftOnSigterm() { return g_left; }

}  // namespace worker
}  // namespace pstrain
