#include "ps/peer_state.h"

namespace pstrain {
namespace ps {

uint64_t MicrosSinceEpoch() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status AdmitIncarnation(const PeerState& p, bool known, const std::string& who,
                        uint64_t incarnation, std::chrono::steady_clock::time_point now,
                        std::chrono::milliseconds peer_timeout, uint64_t now_micros) {
  if (incarnation == 0) return Status::OK();   // a request that names no process (plaintext tools)
  const uint64_t started = incarnation >> 12;  // the id's start time, above 12 random bits
  const uint64_t skew =
      std::chrono::duration_cast<std::chrono::microseconds>(kIncarnationSkew).count();
  if (started > now_micros + skew) {
    return InvalidArgument(who + "'s process says it started more than " +
                           std::to_string(kIncarnationSkew.count()) +
                           " s after this server's clock: its host's clock is wrong (check NTP) "
                           "or its process id is forged; refused");
  }
  if (!known || incarnation >= p.incarnation) return Status::OK();
  const bool newer_live = !p.left && !p.missing && now - p.last_seen <= peer_timeout;
  if (!newer_live) return Status::OK();
  // The newer process's incarnation is not told: it would let the sender pose as it.
  return FailedPrecondition(who + " process " + std::to_string(incarnation) +
                            " is older than one that has spoken since and is still live: a stale "
                            "process is refused");
}

void NotePull(PeerState* p) { p->pulled = true; }

Status MayPush(const PeerState& p, const std::string& who, const wire::Message& push, bool retry) {
  if (retry || p.pulled) return Status::OK();
  return PermissionDenied(who + "'s push " + std::to_string(push.sequence) + " (step " +
                          std::to_string(push.step) +
                          ") follows its previous push with no pull from this server in "
                          "between: a worker pushes once per pull of the values it computed from");
}

void NotePushTaken(PeerState* p) { p->pulled = false; }

}  // namespace ps
}  // namespace pstrain
