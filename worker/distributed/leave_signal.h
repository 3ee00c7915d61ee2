// SIGTERM to a distributed worker: leave the job cleanly instead of dying mid-step. The worker
// finishes the step it is in, skips the final barrier, and returns; its PsClient's heartbeat
// monitor then says goodbye, so the servers count it out at once rather than after 5 s of
// silence (docs/replication.md section 6; the launcher's remove-worker sends the signal). The
// single-process trainer (worker/training/trainer.cc) stops the same way, with its own flag.
#pragma once

namespace pstrain {
namespace worker {

// Turns SIGTERM into a flag taken by a thread of its own (common/signal_watch.h): before the
// worker starts any thread, so that no step is interrupted by it.
void LeaveOnSigterm();
// Whether SIGTERM has come since LeaveOnSigterm.
bool LeaveRequested();
// Whether the worker left because of it (set by MarkLeftOnSigterm, read by main for the exit
// code 128 + SIGTERM that the launcher expects of a stopped role).
void MarkLeftOnSigterm();
bool LeftOnSigterm();

}  // namespace worker
}  // namespace pstrain
