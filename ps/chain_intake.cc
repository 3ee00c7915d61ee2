#include "ps/chain_intake.h"

#include <utility>

namespace pstrain {
namespace ps {

using wire::Message;

namespace {

// Requests that wait for a map this task has not yet been sent: about one per worker in
// flight; more is a sender that ignores the map.
constexpr size_t kMaxWaiting = 4096;
constexpr uint64_t kMaxEpochsAhead = 16;  // maps a request may be ahead of this task's

std::string Who(const Message& m) { return m.role + " " + std::to_string(m.task_index); }

}  // namespace

ChainIntake::Verdict ChainIntake::Check(const ReplicaChain& chain, const std::string& peer,
                                        const Message& request, Status* why) {
  const std::string what = wire::MessageTypeName(request.type);
  const std::string epoch = std::to_string(chain.epoch());
  auto refuse = [&](Status s) {
    *why = std::move(s);
    return Verdict::kRefuse;
  };
  if (request.shard != shard_) {
    return refuse(InvalidArgument("a " + what + " for shard " + std::to_string(request.shard) +
                                  " reached shard " + std::to_string(shard_)));
  }
  if (request.map_epoch > chain.epoch()) {
    // Its sender has a newer map than this task: it is answered once the map arrives.
    if (request.map_epoch > chain.epoch() + kMaxEpochsAhead) {
      return refuse(InvalidArgument("map epoch " + std::to_string(request.map_epoch) +
                                    " is more than " + std::to_string(kMaxEpochsAhead) +
                                    " ahead of this task's " + epoch));
    }
    if (waiting_.size() >= kMaxWaiting) {
      return refuse(Unavailable("too many requests of map epoch " +
                                std::to_string(request.map_epoch) +
                                " waiting for that map (this task has epoch " + epoch + ")"));
    }
    waiting_.push_back({peer, request});
    return Verdict::kWait;
  }
  if (!chain.active()) {
    return refuse(FailedPrecondition("shard " + std::to_string(shard_) +
                                     " has no shard map yet; it takes no " + what));
  }
  const int p = chain.predecessor();
  if (request.role == "ps" && request.task_index == p) {
    // Its predecessor still, whichever map it was sent under: a map that changed another
    // part of the chain reaches the tasks one after another.
    return Verdict::kTake;
  }
  if (request.map_epoch < chain.epoch()) {
    return refuse(Aborted("a " + what + " of map epoch " + std::to_string(request.map_epoch) +
                          " is older than this shard's map epoch " + epoch + ", in which " +
                          Who(request) + " is not its predecessor: refused (its sender has " +
                          "lost its place)"));
  }
  return refuse(PermissionDenied(
      "a " + what + " from " + Who(request) + ", which is not the predecessor of shard " +
      std::to_string(shard_) + " at map epoch " + epoch +
      (p < 0 ? " (this task has none)" : " (task " + std::to_string(p) + ")")));
}

std::vector<ChainIntake::Waiting> ChainIntake::TakeWaiting() { return std::exchange(waiting_, {}); }

}  // namespace ps
}  // namespace pstrain
