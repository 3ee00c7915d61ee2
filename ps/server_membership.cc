// ParameterServer's side of elastic workers (ps/membership.h, docs/replication.md section 6):
// what a change in the live workers releases, and the async pushes held below --min_workers.
// With --min_workers=0 these keep today's fixed-N behaviour.
#include <glog/logging.h>

#include "ps/membership.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {

using wire::Message;
using wire::MessageType;

bool ParameterServer::HoldPush(const std::string& peer, const Message& request) {
  if (!membership_->elastic() || options_.mode != UpdateMode::kAsync || !initialized_ ||
      !membership_->BelowMinimum(peers_)) {
    return false;
  }
  // A retry of a push already applied is answered as always (HandlePush).
  auto it = peers_.find(Who(request));
  if (it != peers_.end() && it->second.incarnation == request.incarnation &&
      request.sequence != 0 && request.sequence <= it->second.last_push_sequence) {
    return false;
  }
  // A retry of a held push replaces it: applied once, answered on the newest connection.
  for (Waiting& w : held_pushes_) {
    if (Who(w.request) == Who(request) && w.request.incarnation == request.incarnation &&
        w.request.sequence == request.sequence) {
      w = {peer, request};
      return true;
    }
  }
  held_pushes_.push_back({peer, request});
  return true;
}

std::vector<ParameterServer::Outgoing> ParameterServer::CheckMembership(
    std::chrono::steady_clock::time_point now) {
  CheckPeers(now);
  std::vector<Outgoing> out;
  if (!membership_->elastic()) return out;
  if (const std::string line = membership_->WaitLine(peers_, now); !line.empty()) {
    LOG(WARNING) << line;
  }
  if (membership_->BelowMinimum(peers_)) return out;
  std::vector<Waiting> held = std::move(held_pushes_);
  held_pushes_.clear();
  for (const Waiting& w : held) {  // in arrival order, as they would have been applied
    for (Outgoing& o : HandlePush(w.peer, w.request)) out.push_back(std::move(o));
  }
  // A window that waited for a worker now gone closes without it.
  if (initialized_ && pushes_in_window_ > 0 && pushes_in_window_ >= required_pushes()) {
    LOG(INFO) << "ps " << options_.task_index << ": closing the update window of step "
              << global_step_ << " with " << pushes_in_window_
              << " push(es): the live workers changed";
    CloseWindow(&out);
  }
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    if (!it->second.empty() && BarrierReleases(it->second)) {
      for (const Waiting& w : it->second) out.push_back({w.peer, Reply(w.request, MessageType::kOk)});
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
  for (const Outgoing& o : out) {
    for (const auto& t : o.message.tensors) {
      stats_.bytes_out += static_cast<int64_t>(t.tensor.bytes());
    }
  }
  return out;
}

bool ParameterServer::BarrierReleases(const std::vector<Waiting>& waiting) const {
  if (membership_->elastic()) {
    std::vector<std::string> participants;
    for (const Waiting& w : waiting) participants.push_back(BarrierParticipant(w.request));
    return membership_->BarrierComplete(participants, peers_);
  }
  const int64_t expected = options_.cluster.workers > 0
                               ? int64_t{options_.cluster.workers} + options_.cluster.evaluators
                               : waiting.front().request.value;
  return static_cast<int64_t>(waiting.size()) >= expected;
}

}  // namespace ps
}  // namespace pstrain
