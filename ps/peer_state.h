// What a parameter server knows of one peer (a worker, the chief or an evaluator), and the two
// rules that decide, from that alone, whether a request of that peer's name may go on:
//
//   which process   a process is named by its incarnation (wire::ProcessIncarnation: its start
//                   time in microseconds, then random bits). One whose start lies more than
//                   kIncarnationSkew ahead of this server's clock is refused: its host's clock
//                   is wrong, or the number is forged to fence out every later process. An older
//                   process than the newest heard is refused while that newer one is live (heard
//                   from within the peer timeout; heartbeats come every second), as ZooKeeper
//                   fences an expired session; once the newer one falls silent, the older may
//                   speak again, so one forged heartbeat cannot lock a real process out.
//   one step per pull
//                   a worker's push carries gradients computed from values it pulled: a new push
//                   (not a retry of one already taken) is let in only if this peer has pulled
//                   from this server since its previous push, or if it is the next part of a
//                   step pushed in parts (its parts still to come, `value`, below the previous
//                   part's; a worker that pulls by layer pulls before the step, not between its
//                   parts). A key cannot move the global step faster than it fetches the model,
//                   nor push more than kMaxPushParts + 1 parts per pull. A peer's first push to
//                   this server is let in once (a server that restarted, or a backup that became
//                   head, has not seen the pull it follows).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/message.h"

namespace pstrain {
namespace ps {

struct PeerState {
  std::chrono::steady_clock::time_point last_seen;
  uint64_t incarnation = 0;
  bool missing = false;  // silent for longer than the peer timeout; logged once
  bool left = false;     // said goodbye (a clean exit)
  // The last push applied from this peer's incarnation, and the reply it got, so that a retry
  // of it is answered again instead of applied twice.
  uint64_t last_push_sequence = 0;
  wire::Message last_push_reply;
  // With a chain (ps/replica_chain.h): the shard's record that answers that push, whose
  // acknowledgement a retry waits for (-1: the open accumulate window's, not yet made).
  int64_t last_push_record = 0;
  // One step per pull: whether this peer has pulled since its last push taken, and how many
  // parts of its step that push said were still to come.
  bool pulled = true;
  int64_t parts_to_come = 0;
  // Set when this server became the shard's head in a failover: the peer's last pull may have
  // been answered by the head before it, so one push is let in without a pull seen here (the
  // push that pull's step resends to this head). Cleared by that push or by a pull here.
  bool pulled_at_previous_head = false;
};

// How far ahead of this server's clock a process's start may lie (hosts' clocks disagree by
// milliseconds under NTP; a minute is a clock that is wrong).
constexpr std::chrono::seconds kIncarnationSkew{60};

// Whether a request from process `incarnation` may speak for the peer `p` now (`known`: the
// server has heard this name before). Refusals never tell the newer process's incarnation.
// `now_micros`: this server's clock, microseconds since the epoch (a parameter for tests).
Status AdmitIncarnation(const PeerState& p, bool known, const std::string& who,
                        uint64_t incarnation, std::chrono::steady_clock::time_point now,
                        std::chrono::milliseconds peer_timeout, uint64_t now_micros);
uint64_t MicrosSinceEpoch();

// The peers a server has heard from, by name ("worker 1").
using Peers = std::map<std::string, PeerState>;
// Admits `request`'s process as `who` (AdmitIncarnation) and records it alive, logging (after
// `log_prefix`) its return from a silence or another process speaking. Returns whether it is
// another process than the one heard last (its last push is then forgotten).
Result<bool> AdmitPeer(Peers* peers, const std::string& who, const wire::Message& request,
                       std::chrono::steady_clock::time_point now,
                       std::chrono::milliseconds peer_timeout, const std::string& log_prefix);
// Marks and logs every peer silent for longer than `peer_timeout` (once per silence); returns
// the newly missing.
std::vector<std::string> FindSilentPeers(Peers* peers, std::chrono::steady_clock::time_point now,
                                         std::chrono::milliseconds peer_timeout,
                                         const std::string& log_prefix);

// One step per pull. `retry`: the push is one this server has taken already (its retry cache,
// or pushes held below --min_workers, answer it); retries pass. A push refused for what it
// carries costs nothing: only a push taken (applied, dropped as stale, or held) uses the pull.
void NotePull(PeerState* p);
Status MayPush(const PeerState& p, const std::string& who, const wire::Message& push, bool retry);
void NotePushTaken(PeerState* p, const wire::Message& push);

}  // namespace ps
}  // namespace pstrain
