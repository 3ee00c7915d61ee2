// ParameterServer's stamps of its shard's state (ps/state_stamps.h, docs/replication.md section
// 5): the head puts the digest of its state into a record while a joiner is listed, and each
// replica that applies a stamped record compares its own. A joiner whose copy disagrees drops
// it and is copied again.
#include "ps/server.h"
#include "ps/state_digest.h"

namespace pstrain {
namespace ps {

using wire::Message;

std::string ParameterServer::StateDigest() const {
  return StateBlake2b(store_->StateTensors(), global_step_);
}

bool ParameterServer::StampDue(std::chrono::steady_clock::time_point now) const {
  // An open window's assigned values are applied here already but ride in its record: until it
  // closes, this state is not what a replica holds after the record being made.
  return policy_->pending() == 0 && stamps_.Due(!chain_.view().joining.empty(), now);
}

void ParameterServer::StampIdleShard(std::chrono::steady_clock::time_point now,
                                     std::vector<Outgoing>* out) {
  if (!initialized_ || !chain_.head() || !StampDue(now)) return;
  Replicate(global_step_, {}, {}, {}, out, now);  // a record of no update, for its stamp
}

bool ParameterServer::CheckStamp(const std::string& peer, const Message& record,
                                 std::vector<Outgoing>* out) {
  const int from = stamps_.copy_from();
  const int64_t copied = stamps_.copy_sequence();
  const std::string me =
      "ps " + std::to_string(options_.task_index) + ": shard " + std::to_string(options_.shard);
  const std::string at = "the head's stamp at record " + std::to_string(record.sequence);
  const std::string copy =
      "the copy of task " + std::to_string(from) + " at record " + std::to_string(copied);
  switch (stamps_.Compare(record.state_digest, StateDigest())) {
    case StateStamps::Verdict::kAgrees:
      return true;
    case StateStamps::Verdict::kVerified:
      LOG(INFO) << me << ": " << copy << " verified by " << at;
      return true;
    case StateStamps::Verdict::kDiverged:
      LOG(ERROR) << me << ": this replica's state differs from " << at << " (step " << global_step_
                 << "): it has diverged from its head";
      return true;
    case StateStamps::Verdict::kForgedCopy:
      break;
  }
  if (!chain_.joiner()) {  // a member already: its tail said it had caught up
    LOG(ERROR) << me << ": " << copy << " differs from " << at
               << ", and this task is a member of the chain already";
    return true;
  }
  LOG(ERROR) << me << ": " << copy << " differs from " << at
             << " (forged or broken): dropped; waiting for a new copy";
  DropCopy();
  ++stats_.rejected;
  out->push_back({peer, Error(record,
                              "shard " + std::to_string(options_.shard) + " has no copy yet: " +
                                  copy + " differed from " + at + " and was dropped",
                              StatusCode::kFailedPrecondition)});
  return false;
}

void ParameterServer::DropCopy() {
  store_->Clear();
  initialized_ = false;
  global_step_ = 0;
  peers_.clear();  // the retry cache came with the copy; heartbeats fill the table again
  stamps_.CopyDropped();
}

}  // namespace ps
}  // namespace pstrain
