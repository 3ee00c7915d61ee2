#include "ps/replica_chain.h"

#include <algorithm>

namespace pstrain {
namespace ps {

int ReplicaChain::position() const {
  if (!active()) return -1;
  auto it = std::find(view_.tasks.begin(), view_.tasks.end(), view_.self);
  return it == view_.tasks.end() ? -1 : static_cast<int>(it - view_.tasks.begin());
}

bool ReplicaChain::joiner() const {
  return active() && !member() &&
         std::find(view_.joining.begin(), view_.joining.end(), view_.self) != view_.joining.end();
}

int ReplicaChain::predecessor() const {
  const int i = position();
  if (i > 0) return view_.tasks[i - 1];
  if (joiner() && !view_.tasks.empty()) return view_.tasks.back();
  return -1;
}

bool ReplicaChain::Set(const View& view, Change* change) {
  *change = Change{};
  if (view.epoch <= view_.epoch) return false;
  const bool was_head = head();
  const int old_successor = successor();
  const int old_predecessor = predecessor();
  const bool was_joiner = joiner();
  view_ = view;
  change->lost_head = was_head && !head();
  change->became_head = !was_head && head();
  if (change->became_head) first_as_head_ = true;
  const int s = successor();
  change->new_successor = s >= 0 && s != old_successor;
  if (change->new_successor) {
    // What the successor holds: every acknowledged record (the prefix property), and what it
    // acknowledged as a joiner if it was one.
    successor_acked_ = committed_;
    auto j = joiners_.find(s);
    if (j != joiners_.end()) successor_acked_ = std::max(successor_acked_, j->second.acked);
  }
  change->new_predecessor = was_joiner && joiner() && predecessor() != old_predecessor;
  // Joiners are the tail's alone; those no longer listed are forgotten.
  std::map<int, Joiner> kept;
  if (tail()) {
    for (int t : view_.joining) {
      auto j = joiners_.find(t);
      Joiner& k = kept[t];
      if (j != joiners_.end()) k = j->second;
      // A new map gives a refused joiner (perhaps restarted with the right config) another
      // copy, and one whose copy never arrived (it may have restarted in between).
      if (k.refused || (k.copied && !k.copy_acked)) k = Joiner{};
    }
  }
  joiners_ = std::move(kept);
  return true;
}

void ReplicaChain::Reset(int64_t records, int64_t step, const std::string& link) {
  if (!link.empty()) link_ = link;
  records_ = committed_ = successor_acked_ = records;
  committed_step_ = step;
  log_.clear();
  for (auto& [task, j] : joiners_) j = Joiner{};  // each needs a copy of the new state
}

std::vector<int> ReplicaChain::Append(const wire::Message& record) {
  records_ = static_cast<int64_t>(record.sequence);
  link_ = wire::NextChainLink(link_, record);
  log_.push_back(record);
  std::vector<int> to;
  if (successor() >= 0) {
    to.push_back(successor());
  } else if (tail()) {
    for (const auto& [task, j] : joiners_) {
      if (j.copied && !j.refused) to.push_back(task);
    }
  }
  return to;
}

Status ReplicaChain::HoldResent(int64_t sequence, const std::string& link, HeldReply ack) {
  auto logged = std::find_if(log_.begin(), log_.end(), [&](const wire::Message& r) {
    return static_cast<int64_t>(r.sequence) == sequence;
  });
  if (logged != log_.end() && logged->link != link) {
    return FailedPrecondition("record " + std::to_string(sequence) +
                              ", sent again, is not the record this replica holds at that "
                              "sequence (its link differs)");
  }
  auto [first, last] = held_.equal_range(sequence);
  for (auto it = first; it != last; ++it) {
    if (it->second.ack) {  // the acknowledgement owed for that sequence: answer the newest
      it->second = std::move(ack);
      return Status::OK();
    }
  }
  held_.emplace(sequence, std::move(ack));
  return Status::OK();
}

std::vector<HeldReply> ReplicaChain::TakeAllHeld() {
  std::vector<HeldReply> out;
  for (auto& [sequence, reply] : held_) out.push_back(std::move(reply));
  held_.clear();
  return out;
}

void ReplicaChain::Acknowledged(int from, int64_t sequence) {
  sequence = std::min(sequence, records_);  // never more than was sent
  if (from >= 0 && from == successor()) {
    successor_acked_ = std::max(successor_acked_, sequence);
    return;
  }
  auto j = joiners_.find(from);
  if (j == joiners_.end() || !j->second.copied || j->second.refused) return;
  j->second.copy_acked = true;
  j->second.acked = std::max(j->second.acked, sequence);
  // Caught up: it holds everything this tail holds, and a record after its copy verified it;
  // from now on it must acknowledge.
  if (j->second.acked >= records_ && j->second.acked > j->second.copy_record) {
    j->second.caught_up = true;
  }
}

std::vector<HeldReply> ReplicaChain::Advance(int64_t step) {
  int64_t reached = records_;
  if (successor() >= 0) {
    reached = successor_acked_;
  } else {
    for (const auto& [task, j] : joiners_) {
      if (j.caught_up) reached = std::min(reached, j.acked);
    }
  }
  committed_ = std::max(committed_, std::min(reached, records_));
  while (!log_.empty() && static_cast<int64_t>(log_.front().sequence) <= committed_) {
    committed_step_ = log_.front().value;
    log_.pop_front();
  }
  if (committed_ == records_) committed_step_ = step;
  std::vector<HeldReply> out;
  while (!held_.empty() && held_.begin()->first <= committed_) {
    out.push_back(std::move(held_.begin()->second));
    held_.erase(held_.begin());
  }
  return out;
}

std::vector<int> ReplicaChain::JoinersToCopy() const {
  std::vector<int> out;
  for (const auto& [task, j] : joiners_) {
    if (!j.copied && !j.refused) out.push_back(task);
  }
  return out;
}

void ReplicaChain::CopySent(int joiner, std::chrono::steady_clock::time_point now) {
  Joiner& j = joiners_[joiner];
  j = Joiner{};
  j.copied = true;  // acknowledged by the joiner's reply, which names the copy's sequence
  j.copied_at = now;
  j.copy_record = records_;
}

void ReplicaChain::CopyRefused(int joiner) {
  auto j = joiners_.find(joiner);
  if (j != joiners_.end()) j->second.refused = true;
}

bool ReplicaChain::JoinerLacksCopy(int from, std::chrono::steady_clock::time_point now) {
  auto it = joiners_.find(from);
  if (it == joiners_.end() || !it->second.copied || it->second.refused) return false;
  if (now - it->second.copied_at < std::chrono::seconds(1)) return false;
  it->second = Joiner{};
  return true;
}

std::vector<int> ReplicaChain::CaughtUpJoiners() const {
  std::vector<int> out;
  for (const auto& [task, j] : joiners_) {
    if (j.caught_up) out.push_back(task);
  }
  return out;
}

}  // namespace ps
}  // namespace pstrain
