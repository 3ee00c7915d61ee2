#include "ps/membership.h"

#include <algorithm>
#include <climits>

namespace pstrain {
namespace ps {

namespace {

bool Live(const PeerState& p) { return !p.left && !p.missing; }

}  // namespace

std::string WorkerName(const std::string& peer_name) {
  if (peer_name == "chief 0") return "worker 0";
  return peer_name.rfind("worker ", 0) == 0 ? peer_name : "";
}

std::set<std::string> Membership::LiveWorkers(const std::map<std::string, PeerState>& peers) {
  std::set<std::string> live;
  for (const auto& [name, p] : peers) {
    const std::string worker = WorkerName(name);
    if (!worker.empty() && Live(p)) live.insert(worker);
  }
  return live;
}

void Membership::NotePush(bool window_empty, const std::map<std::string, PeerState>& peers) {
  if (elastic() && window_empty) members_ = LiveWorkers(peers);
}

bool Membership::BelowMinimum(const std::map<std::string, PeerState>& peers) const {
  return elastic() && static_cast<int>(LiveWorkers(peers).size()) < o_.min_workers;
}

int Membership::RequiredPushes(const std::map<std::string, PeerState>& peers,
                               const std::vector<std::string>& pushed) const {
  if (!elastic()) {
    if (o_.mode == UpdateMode::kSync) return std::max(1, o_.fixed_workers - o_.backup_workers);
    return o_.accumulate_n > 0 ? o_.accumulate_n : o_.fixed_workers;
  }
  const std::set<std::string> live = LiveWorkers(peers);
  if (static_cast<int>(live.size()) < o_.min_workers) return INT_MAX;  // nothing is applied
  if (o_.mode == UpdateMode::kAccumulate && o_.accumulate_n > 0) return o_.accumulate_n;
  // Members still live, or gone after pushing into this window (their push is in it).
  int counted = 0;
  for (const std::string& m : members_) {
    const bool pushed_here = std::find(pushed.begin(), pushed.end(), m) != pushed.end();
    if (live.count(m) || pushed_here) ++counted;
  }
  if (members_.empty()) counted = static_cast<int>(live.size());  // no window open yet
  if (o_.mode == UpdateMode::kSync) return std::max(1, counted - o_.backup_workers);
  return std::max(1, counted);
}

bool Membership::BarrierComplete(const std::vector<std::string>& waiting,
                                 const std::map<std::string, PeerState>& peers) const {
  int evaluators = 0;
  for (const std::string& w : waiting) evaluators += w.rfind("evaluator ", 0) == 0 ? 1 : 0;
  if (evaluators < o_.evaluators) return false;
  const std::set<std::string> live = LiveWorkers(peers);
  if (static_cast<int>(live.size()) < o_.min_workers) return false;
  for (const std::string& worker : live) {
    if (std::find(waiting.begin(), waiting.end(), worker) == waiting.end()) return false;
  }
  return true;
}

std::string Membership::WaitLine(const std::map<std::string, PeerState>& peers,
                                 std::chrono::steady_clock::time_point now) {
  if (!BelowMinimum(peers)) return "";
  if (last_wait_line_ != std::chrono::steady_clock::time_point{} &&
      now - last_wait_line_ < o_.wait_log_interval) {
    return "";
  }
  last_wait_line_ = now;
  const size_t live = LiveWorkers(peers).size();
  std::string line = o_.who + " waits: " + std::to_string(live) + " live worker" +
                     (live == 1 ? "" : "s") + ", --min_workers=" + std::to_string(o_.min_workers);
  // The worker heard from last among those gone: usually the one the job waits for.
  const PeerState* gone = nullptr;
  std::string gone_name;
  for (const auto& [name, p] : peers) {
    if (WorkerName(name).empty() || Live(p)) continue;
    if (gone == nullptr || p.last_seen > gone->last_seen) gone = &p, gone_name = WorkerName(name);
  }
  if (gone != nullptr) {
    const auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - gone->last_seen);
    line += " (" + gone_name +
            (gone->left ? " said goodbye" : " silent " + std::to_string(silent.count()) + " s") +
            ")";
  }
  return line;
}

}  // namespace ps
}  // namespace pstrain
