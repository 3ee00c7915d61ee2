#include "worker/distributed/leave_signal.h"

#include <csignal>

namespace pstrain {
namespace worker {

namespace {
volatile std::sig_atomic_t g_leave = 0;
bool g_left = false;
void OnSigterm(int) { g_leave = 1; }
}  // namespace

void LeaveOnSigterm() { std::signal(SIGTERM, OnSigterm); }
bool LeaveRequested() { return g_leave != 0; }
void MarkLeftOnSigterm() { g_left = true; }
bool LeftOnSigterm() { return g_left; }

}  // namespace worker
}  // namespace pstrain
