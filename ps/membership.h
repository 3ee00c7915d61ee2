// Which workers a parameter server counts, when workers may join and leave a running job
// (--min_workers > 0; docs/replication.md section 6). TensorFlow 1.x's SyncReplicasOptimizer
// fixes N at graph construction and hangs when a worker dies; this follows the servers' peer
// table instead, as Horovod's elastic mode follows its rendezvous: a worker is live from its
// first request (a push or a heartbeat, every second) until it says goodbye or falls silent
// for ServerOptions::peer_timeout.
//
//   sync        a window needs max(1, members - backup_workers) pushes, where the members are
//               the workers live when its first push came, less those that left without
//               pushing: a joiner counts from the next window, a leave can close an open one;
//   accumulate  accumulate_n pushes, or as many as there are members;
//   barrier     releases when every live worker and every evaluator waits (not the request's
//               count, which a worker's own --worker_hosts set).
// Below --min_workers live workers nothing is applied: windows stay open and async pushes are
// held (ParameterServer keeps them), and the server says why every 10 s.
//
// With min_workers == 0 (the default) none of this runs: N is --worker_hosts' fixed count.
// The class only reads the peer table; ParameterServer owns the windows and the held replies.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ps/peer_state.h"
#include "ps/update_mode.h"

namespace pstrain {
namespace ps {

struct MembershipOptions {
  UpdateMode mode = UpdateMode::kAsync;
  int fixed_workers = 1;  // the fixed N (ServerOptions::num_workers), used when min_workers == 0
  int backup_workers = 0;
  int accumulate_n = 0;
  int min_workers = 0;                // 0: fixed N
  int evaluators = 0;                 // the cluster's, all of whom a barrier waits for
  std::string who = "ps 0: shard 0";  // how the wait line names the server
  std::chrono::seconds wait_log_interval{10};
};

class Membership {
 public:
  explicit Membership(MembershipOptions options) : o_(std::move(options)) {}

  bool elastic() const { return o_.min_workers > 0; }

  // The live workers in `peers`, named as barriers name them ("worker 0" for the chief too).
  static std::set<std::string> LiveWorkers(const std::map<std::string, PeerState>& peers);

  // At every push's arrival, before it counts: while the window holds no push, its members are
  // the workers live now.
  void NotePush(bool window_empty, const std::map<std::string, PeerState>& peers);
  // The pushes that close the open window; `pushed` names the workers whose push it holds (sync:
  // the waiting pushes). A huge number while below --min_workers: the window stays open.
  int RequiredPushes(const std::map<std::string, PeerState>& peers,
                     const std::vector<std::string>& pushed) const;
  // Fewer live workers than --min_workers (never with min_workers == 0).
  bool BelowMinimum(const std::map<std::string, PeerState>& peers) const;
  // Whether a barrier whose waiting participants are `waiting` ("worker 1", "evaluator 0")
  // releases: every live worker and `evaluators` evaluators wait.
  bool BarrierComplete(const std::vector<std::string>& waiting,
                       const std::map<std::string, PeerState>& peers) const;
  // "ps 0: shard 0 waits: 1 live worker, --min_workers=2 (worker 2 silent 7 s)" when below the
  // minimum and the last such line is older than the interval; "" otherwise.
  std::string WaitLine(const std::map<std::string, PeerState>& peers,
                       std::chrono::steady_clock::time_point now);

 private:
  MembershipOptions o_;
  std::set<std::string> members_;  // of the open window
  std::chrono::steady_clock::time_point last_wait_line_{};
};

// "worker 1" for a peer-table name "worker 1" or "chief 0" (as "worker 0"); "" for others.
std::string WorkerName(const std::string& peer_name);

}  // namespace ps
}  // namespace pstrain
