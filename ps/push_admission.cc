#include "ps/push_admission.h"

#include <glog/logging.h>

#include <utility>

#include "common/wire/refusal_log.h"

namespace pstrain {
namespace ps {

namespace {
// How the peer table names a push's sender ("worker 1").
std::string NameOf(const wire::Message& push) {
  return push.role + " " + std::to_string(push.task_index);
}
}  // namespace

PushAdmission::PushAdmission(PushAdmissionOptions options, const Peers& peers)
    : options_(std::move(options)), peers_(peers), magnitude_(options_.outlier_binades) {}

const PeerState* PushAdmission::SenderOf(const wire::Message& push) const {
  auto it = peers_.find(NameOf(push));
  return it == peers_.end() ? nullptr : &it->second;
}

bool PushAdmission::IsRetry(const wire::Message& push) const {
  const PeerState* p = SenderOf(push);
  return p != nullptr && p->incarnation == push.incarnation && push.sequence != 0 &&
         push.sequence <= p->last_push_sequence;
}

Status PushAdmission::Pace(const wire::Message& push, bool held) const {
  const PeerState* p = SenderOf(push);
  // A push refused for its fields changes nothing and is refused as such, later.
  if (!options_.one_push_per_pull || p == nullptr || !CheckFields(push).ok()) return Status::OK();
  return MayPush(*p, NameOf(push), push, held || IsRetry(push));
}

Status PushAdmission::CheckFields(const wire::Message& push) const {
  const PeerState* p = SenderOf(push);
  return CheckPushHeader(push, p == nullptr ? 0 : p->last_push_sequence, options_.takes_parts,
                         options_.policy, NameOf(push));
}

PushVerdict PushAdmission::Check(const VariableStore& store, const wire::Message& push) {
  PushVerdict v;
  if (v.why = CheckFields(push); !v.why.ok()) return v;
  if (IsRetry(push)) {
    LOG(WARNING) << options_.log_name << ": push " << push.sequence << " from " << NameOf(push)
                 << " (step " << push.step
                 << ") is a retry of one already applied; not applied again";
    const PeerState& p = *SenderOf(push);
    v.kind = PushVerdict::Kind::kRetry;
    v.reply = p.last_push_reply;
    v.reply.request_id = push.request_id;
    v.record = p.last_push_record;
    return v;
  }
  Result<PushContents> contents = kinds_.Check(store, push);
  if (!contents.ok()) {
    // Who sent it and from which step: a worker whose GPU produced a wild gradient, or a key in
    // the wrong hands, shows in the reply and the server's log.
    v.why = InvalidArgument(NameOf(push) + "'s push of step " + std::to_string(push.step) +
                            " refused: " + contents.status().message());
    return v;
  }
  v.kind = PushVerdict::Kind::kTake;
  v.contents = std::move(contents).value();
  return v;
}

bool PushAdmission::ScaleOutlier(const wire::Message& push, PushContents* contents) {
  const std::string who = NameOf(push);
  const std::string why =
      magnitude_.ScaleDown(who, contents->largest_exponent, &contents->gradients);
  if (why.empty()) return false;
  PSTRAIN_REFUSAL_WARNING("ps-outlier:" + who, options_.log_name + ": " + who + "'s push of step " +
                                                   std::to_string(push.step) + " " + why);
  return true;
}

}  // namespace ps
}  // namespace pstrain
