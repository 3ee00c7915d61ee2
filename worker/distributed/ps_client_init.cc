// The chief's start (Initialize: the chain master with replicas, then every shard initialised,
// kept or restored) and the other roles' wait for it (WaitUntilInitialized); ps_client.h says
// what each does.
#include <thread>

#include "common/checkpoint/cluster_checkpoint.h"
#include "common/wire/map_proof.h"
#include "common/wire/same_host.h"
#include "worker/distributed/ps_client.h"
#include "worker/distributed/shard_master.h"

namespace pstrain {
namespace worker {

using std::chrono::milliseconds;
using wire::Message;
using wire::MessageType;

Result<PsClient::Initialized> PsClient::Initialize(int64_t step, const std::string& train_dir) {
  if (routes_->replicated() && !master_) {
    ShardMaster::Options options;
    options.connect = [this](int t) -> Result<std::unique_ptr<wire::Connection>> {
      ASSIGN_OR_RETURN(wire::ServerRoute route, wire::RouteToServer(curve_, t, hosts_[t]));
      return wire::Connection::Connect(route.endpoint, {}, route.security);
    };
    options.health = [this](int t) { return heartbeat_->Of(t); };
    options.fresh = [this](int shard) { router_->MarkFresh(shard); };
    if (curve_.curve()) {
      options.prove = [this](const replication::ShardMap& map) {
        return wire::ProveMap(map, curve_);
      };
      options.check = MapCheckOf(curve_);
    }
    ASSIGN_OR_RETURN(master_, ShardMaster::Create(hosts_, routes_->replicas(), Who(), routes_.get(),
                                                  std::move(options)));
    RETURN_IF_ERROR(master_->Start(std::chrono::seconds(60)));
  }
  ASSIGN_OR_RETURN(Initialized result, InitializeShards(step, train_dir));
  if (master_) master_->Watch();
  return result;
}

Result<PsClient::Initialized> PsClient::InitializeShards(int64_t step,
                                                         const std::string& train_dir) {
  const int n = static_cast<int>(hosts_.size());
  // What every server holds: variables or not, and the steps of its whole checkpoints.
  std::vector<std::pair<int, Message>> ask;
  for (int s = 0; s < n; ++s) ask.emplace_back(s, Request(MessageType::kRegister));
  ASSIGN_OR_RETURN(std::vector<Message> held, router_->Exchange(ask, kShortTimeout));
  Initialized result;
  std::vector<std::vector<int64_t>> whole;
  std::string listed;
  for (int s = 0; s < n; ++s) {
    result.kept += held[s].value == 1;
    const std::vector<int64_t>& steps = held[s].steps;
    whole.push_back(steps);
    listed +=
        (s ? "; " : "") + ServerName(s) + ": " +
        (steps.empty() ? "none"
                       : std::to_string(steps.size()) + ", newest " + std::to_string(steps.back()));
  }
  if (result.kept == n) return result;  // only the chief restarted: the servers keep theirs

  std::optional<int64_t> restore;
  if (!train_dir.empty()) {
    Result<std::vector<int64_t>> committed = ReadCommittedSteps(train_dir);
    if (committed.ok()) {
      restore = NewestRestorableStep(whole, committed.value());
    } else {
      restore = NewestRestorableStep(whole, std::nullopt);
      if (restore && committed.status().code() != StatusCode::kNotFound) {
        LOG(WARNING) << Who() << ": " << committed.status().ToString()
                     << "; taking the newest step every server holds whole instead";
      }
    }
  }
  std::vector<std::pair<int, Message>> out;
  if (restore) {
    if (result.kept > 0) {
      LOG(WARNING) << Who() << ": " << result.kept << " of " << n << " servers kept running but "
                   << n - result.kept << " lost their variables; every server goes back to "
                   << "committed step " << *restore << ", so that no shard is at another step";
    }
    for (int s = 0; s < n; ++s) {
      Message m = Request(MessageType::kRestore);
      m.step = *restore;
      out.emplace_back(s, m);
    }
    RETURN_IF_ERROR(router_->Exchange(out, kStepTimeout).status());
    // Later commits belong to the run the cluster just went back on.
    Status s = UncommitStepsAfter(train_dir, *restore);
    if (!s.ok()) LOG(WARNING) << Who() << ": " << s.ToString();
    LOG(INFO) << Who() << ": every server restored its shard of committed step " << *restore
              << " (whole checkpoints: " << listed << ")";
    result.kept = 0;
    result.restored = restore;
    return result;
  }
  if (!train_dir.empty()) {
    LOG(INFO) << Who() << ": no committed step that every server holds whole (" << listed
              << "); servers without variables start from this chief's values at step " << step;
  }
  for (int s = 0; s < n; ++s) out.emplace_back(s, InitMessage(s, step));
  ASSIGN_OR_RETURN(std::vector<Message> replies, router_->Exchange(out, kShortTimeout));
  result.kept = 0;
  for (const Message& r : replies) result.kept += r.text == "kept";
  if (result.kept > 0) {
    LOG(WARNING) << Who() << ": " << result.kept << " of " << n << " servers kept the values they "
                 << "held while the others start afresh: nothing committed to go back to";
  }
  return result;
}

Status PsClient::WaitUntilInitialized(std::chrono::seconds timeout, bool ended_when_gone) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  milliseconds backoff(100);
  bool answered = false;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::pair<int, Message>> out;
    for (size_t s = 0; s < hosts_.size(); ++s) {
      out.emplace_back(static_cast<int>(s), Request(MessageType::kRegister));
    }
    Result<std::vector<Message>> replies = router_->Exchange(out, kShortTimeout);
    bool ready = replies.ok();
    if (ready) {
      for (const Message& r : replies.value()) ready = ready && r.value == 1;
    }
    if (ready) return Status::OK();
    answered = answered || replies.ok();
    // A server that says training is over will never be initialised for this run.
    if (!replies.ok() && replies.status().code() == StatusCode::kOutOfRange) {
      return replies.status();
    }
    if (ended_when_gone && answered && replies.status().code() == StatusCode::kUnavailable) {
      return OutOfRange("the servers answered, then went away (" + replies.status().message() +
                        "): the run is over");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("the parameter servers were not initialised within " +
                         std::to_string(timeout.count()) + " s (is the chief, worker 0, up?)");
    }
    if (attempt % 20 == 0) {
      LOG(INFO) << role_ << " " << task_index_ << ": waiting for the chief to initialise the "
                << "variables" << (replies.ok() ? "" : " (" + replies.status().message() + ")");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
}

}  // namespace worker
}  // namespace pstrain
