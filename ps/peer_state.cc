#include "ps/peer_state.h"

#include <glog/logging.h>

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
  // The newer process's incarnation is not told: it would let the sender pose as it. Not
  // FailedPrecondition: a chief reads that, from a server, as "lost its variables" and
  // re-initialises it (worker/distributed/request_router.cc).
  return PermissionDenied(who + " process " + std::to_string(incarnation) +
                          " is older than one that has spoken since and is still live: a stale "
                          "process is refused");
}

void NotePull(PeerState* p) {
  p->pulled = true;
  p->pulled_at_previous_head = false;
}

Status MayPush(const PeerState& p, const std::string& who, const wire::Message& push, bool retry) {
  // The next part of a step pushed in parts counts down from the part before it.
  if (retry || p.pulled || p.pulled_at_previous_head || push.value < p.parts_to_come) {
    return Status::OK();
  }
  return PermissionDenied(who + "'s push " + std::to_string(push.sequence) + " (step " +
                          std::to_string(push.step) + ", " + std::to_string(push.value) +
                          " parts to come) follows its previous step's last part with no pull "
                          "from this server in between: a worker pushes one step per pull of the "
                          "values it computed from");
}

void NotePushTaken(PeerState* p, const wire::Message& push) {
  // A new step without a pull here spends what a failover granted.
  if (!p->pulled && push.value >= p->parts_to_come) p->pulled_at_previous_head = false;
  p->pulled = false;
  p->parts_to_come = push.value;
}

Result<bool> AdmitPeer(Peers* peers, const std::string& who, const wire::Message& request,
                       std::chrono::steady_clock::time_point now,
                       std::chrono::milliseconds peer_timeout, const std::string& log_prefix) {
  auto it = peers->find(who);
  const bool is_new = it == peers->end();
  RETURN_IF_ERROR(AdmitIncarnation(is_new ? PeerState{} : it->second, !is_new, who,
                                   request.incarnation, now, peer_timeout, MicrosSinceEpoch()));
  if (is_new) it = peers->emplace(who, PeerState{}).first;
  PeerState& p = it->second;
  if (!is_new && p.missing) {
    const double silent = std::chrono::duration<double>(now - p.last_seen).count();
    LOG(WARNING) << log_prefix << who << " is back after " << silent << " s of silence";
  }
  const bool another = !is_new && request.incarnation != 0 && p.incarnation != 0 &&
                       request.incarnation != p.incarnation;
  if (another) {
    LOG(WARNING) << log_prefix << who
                 << (request.incarnation > p.incarnation
                         ? " restarted (a new process since its last request)"
                         : ": an older process of it speaks again (the newer one fell silent)");
    p.last_push_sequence = 0;
  }
  if (request.incarnation != 0) p.incarnation = request.incarnation;
  p.last_seen = now;
  p.missing = false;
  p.left = false;
  return another;
}

std::vector<std::string> FindSilentPeers(Peers* peers, std::chrono::steady_clock::time_point now,
                                         std::chrono::milliseconds peer_timeout,
                                         const std::string& log_prefix) {
  std::vector<std::string> found;
  for (auto& [who, p] : *peers) {
    if (p.missing || p.left || now - p.last_seen <= peer_timeout) continue;
    p.missing = true;
    found.push_back(who);
    LOG(WARNING) << log_prefix << who << " has sent nothing for "
                 << std::chrono::duration<double>(now - p.last_seen).count()
                 << " s (heartbeats are due every second): presumed dead";
  }
  return found;
}

}  // namespace ps
}  // namespace pstrain
