// ParameterServer's side of elastic workers (ps/membership.h, docs/replication.md section 6):
// what a change in the live workers releases, and the async pushes held below --min_workers.
// With --min_workers=0 these keep the fixed-N behaviour.
#include <glog/logging.h>

#include <algorithm>

#include "ps/membership.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

bool ParameterServer::HoldPush(const std::string& peer, const Message& request,
                               std::vector<Outgoing>* out) {
  if (!membership_->elastic() || options_.mode != UpdateMode::kAsync || !initialized_ ||
      !membership_->BelowMinimum(peers_)) {
    return false;
  }
  // A retry of a push already applied is answered from the retry cache, never applied again.
  if (admission_.IsRetry(request)) return false;
  // An earlier process of the sender is gone: its held pushes were never acknowledged.
  held_pushes_.erase(std::remove_if(held_pushes_.begin(), held_pushes_.end(),
                                    [&](const Waiting& w) {
                                      return Who(w.request) == Who(request) &&
                                             w.request.incarnation != request.incarnation;
                                    }),
                     held_pushes_.end());
  uint64_t last_held = 0;
  int held_here = 0;
  for (Waiting& w : held_pushes_) {
    if (Who(w.request) != Who(request)) continue;
    if (w.request.sequence == request.sequence) {  // a retry: applied once, answered here
      w = {peer, request};
      return true;
    }
    last_held = std::max(last_held, w.request.sequence);
    ++held_here;
  }
  // The sender's next push is checked now; the parts after it when they are applied.
  Status s = held_here == 0 ? admission_.CheckFields(request) : Status::OK();
  if (s.ok() && held_here > 0 && request.sequence != last_held + 1) {
    s = InvalidArgument("push " + std::to_string(request.sequence) + " from " + Who(request) +
                        " does not follow push " + std::to_string(last_held) +
                        ", held while too few workers are live (expected the next)");
  }
  if (s.ok() && held_here > kMaxPushParts) {
    s = InvalidArgument("more than " + std::to_string(kMaxPushParts) + " pushes from " +
                        Who(request) + " held while too few workers are live");
  }
  if (!s.ok()) {
    ++stats_.rejected;
    out->push_back({peer, Error(request, s.message())});
    return true;
  }
  held_pushes_.push_back({peer, request});
  return true;
}

bool ParameterServer::IsHeld(const Message& request) const {
  return std::any_of(held_pushes_.begin(), held_pushes_.end(), [&](const Waiting& w) {
    return Who(w.request) == Who(request) && w.request.incarnation == request.incarnation &&
           w.request.sequence == request.sequence;
  });
}

std::vector<ParameterServer::Outgoing> ParameterServer::CheckMembership(
    std::chrono::steady_clock::time_point now) {
  CheckPeers(now);
  std::vector<Outgoing> out;
  StampIdleShard(now, &out);
  if (!membership_->elastic()) return out;
  if (const std::string line = membership_->WaitLine(peers_, now); !line.empty()) {
    LOG(WARNING) << line;
  }
  // Only a head applies: a backup's updates come in its predecessor's records.
  if (chain_.active() && !chain_.head()) return out;
  if (membership_->BelowMinimum(peers_)) return out;
  std::vector<Waiting> held = std::move(held_pushes_);
  held_pushes_.clear();
  for (const Waiting& w : held) {  // in arrival order, as they would have been applied
    for (Outgoing& o : HandlePush(w.peer, w.request)) out.push_back(std::move(o));
  }
  // A window that waited for a worker now gone closes without it.
  if (initialized_) policy_->CloseIfComplete(&out);
  AnswerReleased(barriers_.ReleaseComplete(
                     [this](const std::vector<Barriers::Wait>& w) { return BarrierComplete(w); }),
                 &out);
  stats_.bytes_out += ReplyBytes(out);
  return out;
}

bool ParameterServer::BarrierComplete(const std::vector<Barriers::Wait>& waiting) const {
  if (!membership_->elastic()) return barriers_.FixedCountReached(waiting);
  std::vector<std::string> participants;
  for (const Barriers::Wait& w : waiting) participants.push_back(Barriers::Participant(w.request));
  return membership_->BarrierComplete(participants, peers_);
}

}  // namespace ps
}  // namespace pstrain
