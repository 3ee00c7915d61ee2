// The checks a push passes on a parameter server before its shard's update policy sees it, in
// the order the server runs them:
//
//   pace       one step per pull (ps/peer_state.h MayPush), when the server asks for it: a push
//              whose fields would be refused passes here, to be refused for them;
//   fields     what a push must carry (ps/push_contents.h CheckPushHeader), against the sender's
//              last push taken;
//   retry      a push its sender's process has had taken already is answered from the retry
//              cache (the sender's PeerState: the reply it got, the record that answered it),
//              logged, and never looked at or applied again;
//   contents   every tensor and each variable's kind (PushKinds);
//   magnitude  an outlier is scaled down (ps/magnitude_guard.h). The server runs it last, after
//              the push's data uses are recorded, so that a push refused for them leaves the
//              guard's windows as they were.
//
// It reads the server's peer table and never writes it: what a taken push changes there (its
// pull used, its reply cached) is the server's to record. A refused push changes nothing here
// either, so a sender cannot teach the contents or magnitude checks with pushes that fail.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/wire/message.h"
#include "ps/magnitude_guard.h"
#include "ps/peer_state.h"
#include "ps/push_contents.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

struct PushAdmissionOptions {
  std::string log_name;            // "ps 0": how refusals and log lines name the server
  bool one_push_per_pull = false;  // ServerOptions::one_push_per_pull
  int outlier_binades = 0;         // ServerOptions::outlier_binades (0: no guard)
  // The update policy's: whether it takes a step in parts, and its name for refusals.
  bool takes_parts = false;
  std::string policy;
};

// What the fields, retry and contents checks decided about a push.
struct PushVerdict {
  enum class Kind { kTake, kRetry, kRefuse };
  Kind kind = Kind::kRefuse;
  Status why;             // kRefuse: what is wrong, and what was expected
  PushContents contents;  // kTake: its gradients and values to assign
  // kRetry: the reply the push got, with the retry's request id, and the replica chain's record
  // that answers it (PeerState::last_push_record).
  wire::Message reply;
  int64_t record = 0;
};

class PushAdmission {
 public:
  // `peers`: the server's peer table, which must outlive this.
  PushAdmission(PushAdmissionOptions options, const Peers& peers);

  // Whether `push` repeats one its sender's process has had taken (by sequence).
  bool IsRetry(const wire::Message& push) const;
  // One step per pull. `held`: a push of the same process and sequence is held for later (below
  // --min_workers), so this one is a retry and passes.
  Status Pace(const wire::Message& push, bool held) const;
  // What a push must carry before anything else is looked at.
  Status CheckFields(const wire::Message& push) const;
  // Fields, retry and contents, in that order; contents refusals name the sender and the step
  // the push was computed from. A push taken notes its variables' kinds for later pushes.
  PushVerdict Check(const VariableStore& store, const wire::Message& push);
  // Scales `contents`' gradients down when they are an outlier for their sender, logging why;
  // whether it did.
  bool ScaleOutlier(const wire::Message& push, PushContents* contents);

 private:
  // The sender's entry in the peer table, or null for a sender not heard from.
  const PeerState* SenderOf(const wire::Message& push) const;

  PushAdmissionOptions options_;
  const Peers& peers_;
  PushKinds kinds_;
  MagnitudeGuard magnitude_;
};

}  // namespace ps
}  // namespace pstrain
