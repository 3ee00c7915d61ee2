// When, within one training step, each per-layer pull was sent and answered and each layer's
// forward started: the evidence that a forward waits for its own layer's values and not for the
// whole model (--pull_schedule, pull_schedule.h). One debug log line per step, written with
// --vmodule=step_timeline=1 (glog's verbose logging of this file alone), e.g.
//
//   worker 0: step 41 timeline (ms from the step's start): issue conv1@ps0 0.01,
//   arrive conv1@ps0 0.42, forward conv1 0.43, issue fc1@ps0 3.10, arrive fc1@ps0 7.92, ...,
//   push fc2+fc1@ps0 160.2, push conv2+conv1@ps0 301.5, backward end 302.0
//
// Times are when this worker's thread saw each event: a reply "arrives" when the worker takes it
// from its connection, which it does while it waits for some layer's values. A host's leader
// pushes from its host average's thread while its own backward goes on, so the record is locked.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace pstrain {
namespace worker {

class StepTimeline {
 public:
  // Starts step `step`'s record; what was noted before is dropped.
  void Begin(int64_t step);
  // A per-layer pull `what` ("conv1@ps0") was sent, or its reply taken.
  void Issued(const std::string& what) { Note("issue", what); }
  void Arrived(const std::string& what) { Note("arrive", what); }
  // Layer `layer`'s forward starts now.
  void ForwardStarts(const std::string& layer) { Note("forward", layer); }
  // A part of the push (`what`: "fc2+fc1@ps0", its layers) leaves now.
  void Pushed(const std::string& what) { Note("push", what); }
  // The step's backward is over (a part pushed before this overlapped it).
  void BackwardEnds() { Note("backward", "end"); }
  // The line above, without the prefix.
  std::string ToString() const;
  // Logs the line for `who` when this file's verbose logging is on.
  void Log(const std::string& who) const;

 private:
  struct Event {
    const char* kind;
    std::string what;
    std::chrono::steady_clock::duration at;  // since Begin
  };
  void Note(const char* kind, const std::string& what);

  mutable std::mutex mutex_;
  int64_t step_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::vector<Event> events_;
};

}  // namespace worker
}  // namespace pstrain
