// How a shard turns the pushes it takes into updates (--update_mode, ps/update_mode.h):
//
//   async       every push is applied on arrival (AsyncUpdates, ps/async_updates.cc); a worker
//               may push one step in parts (`value`: parts still to come), each applied on
//               arrival, and the global step counts the step once, at its last part;
//   accumulate  pushes are summed until N have arrived, then their mean is applied once; a push
//               computed from a version older than max_staleness updates is dropped and counted
//               (AccumulateUpdates, ps/accumulate_updates.h);
//   sync        accumulate whose pushes, and their senders' next pulls, are answered only once
//               the update they took part in is applied: workers move in lockstep (SyncUpdates).
//
// A policy decides when to apply and whom to answer when. The shard it works for (UpdateShard,
// which ParameterServer is) applies, counts, and commits: it sends the replies now or, with a
// replica chain, once the chain holds the update's record.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/outgoing.h"
#include "ps/push_contents.h"
#include "ps/replica_chain.h"
#include "ps/server_stats.h"
#include "ps/update_mode.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

using NamedTensors = VariableStore::NamedTensors;

// One update as a replica chain records it: the gradients as the optimizer consumed them, the
// values assigned, and the retry-cache entries of the pushes it answers.
struct Update {
  int64_t step = 0;
  NamedTensors prepared;
  NamedTensors assigns;
  std::vector<wire::PushEntry> pushes;
};

// What a policy may do to the shard it works for.
class UpdateShard {
 public:
  virtual ~UpdateShard() = default;
  virtual int64_t global_step() const = 0;
  // Pushes the open window needs before it closes (the workers counted now).
  virtual int required_pushes() const = 0;
  virtual bool replicated() const = 0;
  // Applies `grads` as the update of `step`, timed; `prepared` (if given) receives the gradients
  // as the optimizer consumed them. `checked`: a push's own tensors, checked as it was taken.
  virtual Status Apply(int64_t step, const NamedTensors& grads, VariableStore::Checked checked,
                       NamedTensors* prepared) = 0;
  // One update applied: the global step advances.
  virtual void CountUpdate() = 0;
  // The staleness of a push computed from `computed_at`, for the server's metrics.
  virtual void NoteStaleness(int64_t computed_at) = 0;
  virtual ServerStats& mutable_stats() = 0;
  virtual wire::Message Ok(const wire::Message& request) const = 0;
  virtual wire::Message Refusal(const wire::Message& request, const std::string& what) = 0;
  virtual wire::Message PullReply(const wire::Message& request) = 0;
  // The retry-cache entry of `request`'s push answered by `reply`.
  virtual wire::PushEntry RetryEntry(const wire::Message& request, const wire::Message& reply) = 0;
  // Keeps `reply` as the answer to a retry of `request`; `in_window`: the push waits in an open
  // window, so a retry waits for the window's record too.
  virtual void RememberPush(const wire::Message& request, const wire::Message& reply,
                            bool in_window) = 0;
  // Sends `replies` now, or, replicated, records `update` down the chain and holds them until
  // the chain acknowledges it; a retry of a push of `pushers` then waits for that record.
  virtual void Commit(Update update, std::vector<HeldReply> replies,
                      const std::vector<std::string>& pushers, std::vector<Outgoing>* out) = 0;
  // "worker 1": the peer a request speaks for.
  virtual std::string Who(const wire::Message& m) const = 0;
};

class UpdatePolicy {
 public:
  static std::unique_ptr<UpdatePolicy> For(UpdateMode mode, UpdateShard* shard,
                                           int64_t max_staleness, std::string log_name);
  virtual ~UpdatePolicy() = default;

  virtual const char* name() const = 0;
  // Whether a step may be pushed in parts (each applied on arrival): async only, since the
  // window modes count whole pushes.
  virtual bool TakesParts() const { return false; }
  // The shard's variables are new or replaced: nothing summed towards an update is kept.
  virtual void Reset(const VariableStore& /*store*/) {}
  // A push taken whole (its contents checked, its assigns made): applied now, or added to the
  // open window.
  virtual void Take(const std::string& peer, const wire::Message& request, const PushContents& push,
                    std::vector<Outgoing>* out) = 0;
  // Whether a pull must wait (sync: its sender's push is in the open window); if so it is kept
  // and answered when the window closes.
  virtual bool HoldPull(const std::string& /*peer*/, const wire::Message& /*request*/) {
    return false;
  }
  // Whether a retry of a push is answered with the original when the window closes (sync).
  virtual bool HoldRetry(const std::string& /*peer*/, const wire::Message& /*request*/) {
    return false;
  }
  // Keeps `reply` to a retry of a push in the open window until the window's record.
  virtual void AnswerWithWindow(const std::string& /*peer*/, wire::Message /*reply*/) {}
  // Closes the open window when the pushes it has now suffice (the live workers changed);
  // whether it closed.
  virtual bool CloseIfComplete(std::vector<Outgoing>* /*out*/) { return false; }
  // The shard is no longer the head: the replies and requests it holds (each answered aborted),
  // and the open window is abandoned.
  virtual std::vector<HeldReply> TakeHeld() { return {}; }
  virtual bool window_empty() const { return true; }
  // The senders whose pushes wait in the open window for their replies (elastic sync counts them).
  virtual std::vector<std::string> waiting_pushers() const { return {}; }
  // Requests and replies held for a later answer.
  virtual size_t pending() const { return 0; }
};

}  // namespace ps
}  // namespace pstrain
