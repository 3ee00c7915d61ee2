// --update_mode=accumulate and sync (ps/accumulate_updates.h).
#include "ps/accumulate_updates.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

namespace pstrain {
namespace ps {

using wire::Message;

void AccumulateUpdates::Reset(const VariableStore& store) {
  sums_.clear();
  for (const std::string& name : store.Names()) {
    sums_.emplace(name, GradientAccumulator(store.Value(name).shape(), shard_->required_pushes(),
                                            max_staleness_));
  }
  pushes_ = 0;
  assigns_.clear();
  entries_.clear();
  pushers_.clear();
}

void AccumulateUpdates::Take(const std::string& peer, const Message& request,
                             const PushContents& push, std::vector<Outgoing>* out) {
  const bool replicated = shard_->replicated();
  if (replicated) assigns_.insert(assigns_.end(), push.assigns.begin(), push.assigns.end());
  if (request.step < shard_->global_step() - max_staleness_) {
    DropStale(peer, request, out);
    return;
  }
  shard_->NoteStaleness(request.step);
  for (const auto& [name, grad] : push.gradients) {
    sums_.at(name).Add(grad, request.step, shard_->global_step());
  }
  const Message reply = shard_->Ok(request);
  shard_->RememberPush(request, reply, /*in_window=*/replicated);
  if (replicated) {
    // Answered with the window's record: aggregate, replicate, then acknowledge.
    entries_.push_back(shard_->RetryEntry(request, reply));
    pushers_.push_back(shard_->Who(request));
  }
  HoldReply(peer, request, out);
  if (++pushes_ >= shard_->required_pushes()) Close(out);
}

void AccumulateUpdates::HoldReply(const std::string& peer, const Message& request,
                                  std::vector<Outgoing>* out) {
  if (shard_->replicated()) {
    replies_.push_back({peer, shard_->Ok(request)});
  } else {
    out->push_back({peer, shard_->Ok(request)});
  }
}

void AccumulateUpdates::DropStale(const std::string& peer, const Message& request,
                                  std::vector<Outgoing>* out) {
  ++shard_->mutable_stats().dropped_stale;
  Message m = shard_->Ok(request);
  m.value = -1;  // dropped
  m.text = "stale: computed from step " + std::to_string(request.step) + ", now at " +
           std::to_string(shard_->global_step()) + " (max_staleness " +
           std::to_string(max_staleness_) + ")";
  VLOG(1) << log_name_ << ": dropped a " << m.text << " push from " << shard_->Who(request);
  shard_->RememberPush(request, m, /*in_window=*/false);
  // Replicated, a record of its own, so that the sender's next push does not skip ahead after a
  // failover.
  Update update{
      shard_->global_step(), {}, std::exchange(assigns_, {}), {shard_->RetryEntry(request, m)}};
  shard_->Commit(std::move(update), {{peer, m}}, {shard_->Who(request)}, out);
}

void AccumulateUpdates::AnswerWithWindow(const std::string& peer, Message reply) {
  replies_.push_back({peer, std::move(reply)});
}

bool AccumulateUpdates::CloseIfComplete(std::vector<Outgoing>* out) {
  if (pushes_ == 0 || pushes_ < shard_->required_pushes()) return false;
  LOG(INFO) << log_name_ << ": closing the update window of step " << shard_->global_step()
            << " with " << pushes_ << " push(es): the live workers changed";
  Close(out);
  return true;
}

void AccumulateUpdates::Close(std::vector<Outgoing>* out) {
  NamedTensors means;
  for (auto& [name, sum] : sums_) {
    if (sum.count() > 0) means.emplace_back(name, sum.TakeAverage());
  }
  const int64_t applied_at = shard_->global_step();
  NamedTensors prepared;
  Status s = shard_->Apply(applied_at, means, VariableStore::Checked::kNo, &prepared);
  if (!s.ok()) {
    LOG(ERROR) << log_name_ << ": " << s.ToString();
    prepared.clear();  // nothing was applied: the record carries no gradients
  }
  pushes_ = 0;
  shard_->CountUpdate();
  std::vector<HeldReply> released = TakeReleased();
  for (HeldReply& h : replies_) released.push_back(std::move(h));
  replies_.clear();
  Update update{applied_at, std::move(prepared), std::exchange(assigns_, {}),
                std::exchange(entries_, {})};
  shard_->Commit(std::move(update), std::move(released), std::exchange(pushers_, {}), out);
}

std::vector<HeldReply> AccumulateUpdates::TakeHeld() {
  std::vector<HeldReply> held = std::move(replies_);
  replies_.clear();
  Abandon();
  return held;
}

void AccumulateUpdates::Abandon() {
  for (auto& [name, sum] : sums_) {
    sum = GradientAccumulator(sum.shape(), shard_->required_pushes(), max_staleness_);
  }
  pushes_ = 0;
  assigns_.clear();
  entries_.clear();
  pushers_.clear();
}

bool SyncUpdates::HoldPull(const std::string& peer, const Message& request) {
  // In lockstep a pull that follows its sender's own push waits for that update.
  const bool behind_push = std::any_of(pushes_waiting_.begin(), pushes_waiting_.end(),
                                       [&](const Waiting& w) { return w.peer == peer; });
  if (!behind_push) return false;
  // One pull waits per sender (a worker pulls once per step): a newer one replaces it.
  const std::string who = shard_->Who(request);
  pulls_waiting_.erase(
      std::remove_if(pulls_waiting_.begin(), pulls_waiting_.end(),
                     [&](const Waiting& p) { return shard_->Who(p.request) == who; }),
      pulls_waiting_.end());
  pulls_waiting_.push_back({peer, request});
  return true;
}

bool SyncUpdates::HoldRetry(const std::string& peer, const Message& request) {
  for (const Waiting& w : pushes_waiting_) {
    if (shard_->Who(w.request) == shard_->Who(request) && w.request.sequence == request.sequence) {
      pushes_waiting_.push_back({peer, request});  // answered with the original
      return true;
    }
  }
  return false;
}

void SyncUpdates::HoldReply(const std::string& peer, const Message& request,
                            std::vector<Outgoing>*) {
  pushes_waiting_.push_back({peer, request});
}

std::vector<HeldReply> SyncUpdates::TakeReleased() {
  std::vector<HeldReply> released;
  for (const Waiting& w : pushes_waiting_) released.push_back({w.peer, shard_->Ok(w.request)});
  for (const Waiting& w : pulls_waiting_)
    released.push_back({w.peer, shard_->PullReply(w.request)});
  pushes_waiting_.clear();
  pulls_waiting_.clear();
  return released;
}

std::vector<HeldReply> SyncUpdates::TakeHeld() {
  // The requests themselves: each is answered aborted, and its sender sends it again.
  std::vector<HeldReply> held = AccumulateUpdates::TakeHeld();
  for (Waiting& w : pushes_waiting_) held.push_back({w.peer, std::move(w.request)});
  for (Waiting& w : pulls_waiting_) held.push_back({w.peer, std::move(w.request)});
  pushes_waiting_.clear();
  pulls_waiting_.clear();
  return held;
}

std::vector<std::string> SyncUpdates::waiting_pushers() const {
  std::vector<std::string> who;
  for (const Waiting& w : pushes_waiting_) who.push_back(shard_->Who(w.request));
  return who;
}

size_t SyncUpdates::pending() const {
  return AccumulateUpdates::pending() + pushes_waiting_.size() + pulls_waiting_.size();
}

}  // namespace ps
}  // namespace pstrain
