#include "worker/distributed/shard_master.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "common/wire/shard_map_message.h"

namespace pstrain {
namespace worker {

using Clock = std::chrono::steady_clock;
using replication::ShardMap;
using replication::TaskHealth;
using std::chrono::milliseconds;
using wire::Message;

namespace {
bool Contains(const std::vector<int>& tasks, int task) {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}
}  // namespace

ShardMap StartingMap(const ShardMap& placement) {
  ShardMap map;
  map.epoch = 1;
  map.chains.resize(placement.num_shards());
  map.joining.resize(placement.num_shards());
  for (int s = 0; s < placement.num_shards(); ++s) {
    const std::vector<int>& placed = placement.chains[s];
    if (placed.empty()) continue;
    map.chains[s] = {placed.front()};
    map.joining[s].assign(placed.begin() + 1, placed.end());
  }
  return map;
}

TaskHealth JudgeTask(const HeartbeatMonitor::Health& seen, uint64_t known) {
  if (!seen.up) return TaskHealth::kDown;
  if (known != 0 && seen.incarnation != 0 && seen.incarnation != known) {
    return TaskHealth::kRestarted;
  }
  return TaskHealth::kUp;
}

Result<replication::MapChange> DecideOnHealth(const ShardMap& map, const ShardMap& placement,
                                              const std::vector<HeartbeatMonitor::Health>& seen,
                                              std::vector<uint64_t>* known) {
  known->resize(seen.size(), 0);
  std::vector<TaskHealth> health;
  for (size_t t = 0; t < seen.size(); ++t) {
    health.push_back(JudgeTask(seen[t], (*known)[t]));
    if (seen[t].up && seen[t].incarnation != 0) (*known)[t] = seen[t].incarnation;
  }
  return replication::NextMap(map, health, placement);
}

std::vector<int> TasksToPoll(const ShardMap& map) {
  std::set<int> tasks;
  for (int s = 0; s < map.num_shards(); ++s) {
    if (s < static_cast<int>(map.joining.size()) && !map.joining[s].empty() &&
        !map.chains[s].empty()) {
      tasks.insert(map.chains[s].back());
      tasks.insert(map.joining[s].begin(), map.joining[s].end());
    }
  }
  return std::vector<int>(tasks.begin(), tasks.end());
}

namespace {

// Whether task `task`'s reply lists `joiner` as caught up with `shard` under `map`'s epoch.
bool Lists(const std::vector<std::pair<int, Message>>& replies, const ShardMap& map, int task,
           int shard, int joiner) {
  for (const auto& [from, reply] : replies) {
    if (from != task || reply.map_epoch != map.epoch) continue;
    for (const wire::Chain& c : reply.caught_up) {
      if (c.shard == shard && Contains(c.tasks, joiner)) return true;
    }
  }
  return false;
}

}  // namespace

ShardMap PromoteCaughtUp(const ShardMap& map, const std::vector<std::pair<int, Message>>& replies,
                         std::vector<Promotion>* promoted) {
  ShardMap next = map;
  const size_t before = promoted->size();
  for (int shard = 0; shard < map.num_shards(); ++shard) {
    if (map.chains[shard].empty() || shard >= static_cast<int>(map.joining.size())) continue;
    const int tail = map.chains[shard].back();
    for (int t : map.joining[shard]) {
      if (!Lists(replies, map, tail, shard, t) || !Lists(replies, map, t, shard, t)) continue;
      Result<ShardMap> promotion = replication::PromoteJoiner(next, shard, t);
      if (!promotion.ok()) continue;
      next = std::move(promotion).value();
      promoted->push_back({shard, t});
    }
  }
  next.epoch = promoted->size() > before ? map.epoch + 1 : map.epoch;
  return next;
}

ShardMap ChooseStartMap(const ShardMap& placement, const std::vector<std::optional<ShardMap>>& held,
                        std::vector<int>* empty) {
  std::optional<ShardMap> best;
  for (const std::optional<ShardMap>& m : held) {
    if (m && m->epoch > 0 && (!best || m->epoch > best->epoch)) best = m;
  }
  if (!best) return StartingMap(placement);
  for (size_t t = 0; t < held.size(); ++t) {
    if (held[t] && held[t]->epoch == 0) empty->push_back(static_cast<int>(t));
  }
  return *best;
}

Result<std::unique_ptr<ShardMaster>> ShardMaster::Create(const std::vector<std::string>& ps_hosts,
                                                         int replicas, std::string who,
                                                         ShardRoutes* routes, Options options) {
  ASSIGN_OR_RETURN(ShardMap placement, replication::PlaceReplicas(ps_hosts, replicas));
  return std::unique_ptr<ShardMaster>(
      new ShardMaster(std::move(placement), std::move(who), routes, std::move(options)));
}

ShardMaster::ShardMaster(ShardMap placement, std::string who, ShardRoutes* routes, Options options)
    : placement_(std::move(placement)),
      who_(std::move(who)),
      routes_(routes),
      options_(std::move(options)),
      connections_(placement_.num_shards(), options_.connect),
      known_(placement_.num_shards(), 0) {}

ShardMaster::~ShardMaster() { Stop(); }

void ShardMaster::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

ShardMap ShardMaster::map() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

Message ShardMaster::Get() const {
  Message get;
  get.type = wire::MessageType::kShardMap;
  get.role = "chief";
  get.task_index = 0;
  get.incarnation = wire::ProcessIncarnation();
  return get;
}

Status ShardMaster::Start(std::chrono::seconds timeout) {
  const int n = placement_.num_shards();
  std::vector<std::optional<ShardMap>> held(n);
  const auto deadline = Clock::now() + timeout;
  auto next_log = Clock::now() + std::chrono::seconds(10);
  while (true) {
    std::vector<std::pair<int, Message>> out;
    for (int t = 0; t < n; ++t) {
      if (!held[t]) out.emplace_back(t, Get());
    }
    if (out.empty()) break;
    std::vector<Result<Message>> replies = connections_.Call(out, options_.call_timeout);
    for (size_t i = 0; i < out.size(); ++i) {
      const int t = out[i].first;
      if (!replies[i].ok()) {
        // A refusal (a server without replication) will not change by waiting for it.
        if (replies[i].status().code() != StatusCode::kUnavailable) {
          LOG(WARNING) << who_ << ": ps " << t
                       << " refused a shard map get: " << replies[i].status().ToString();
          held[t] = ShardMap{};
        }
        continue;
      }
      if (replies[i]->map_epoch == 0) {
        held[t] = ShardMap{};
        continue;
      }
      Result<ShardMap> m = wire::MapOfMessage(*replies[i], n, n);
      if (m.ok() && options_.check) {
        if (Status proved = options_.check(*m, *replies[i]); !proved.ok()) m = proved;
      }
      if (m.ok()) {
        held[t] = std::move(m).value();
      } else {
        LOG(WARNING) << who_ << ": ps " << t << "'s shard map: " << m.status().ToString();
      }
    }
    std::string missing;
    for (int t = 0; t < n; ++t) {
      if (!held[t]) missing += (missing.empty() ? "ps " : ", ps ") + std::to_string(t);
    }
    if (missing.empty()) break;
    if (Clock::now() > deadline) {
      LOG(WARNING) << who_ << ": " << missing << " did not say which shard map it holds within "
                   << timeout.count() << " s; starting without its answer";
      break;
    }
    if (Clock::now() > next_log) {
      LOG(INFO) << who_ << ": waiting for " << missing << " to answer for its shard map";
      next_log = Clock::now() + std::chrono::seconds(10);
    }
  }
  std::vector<int> empty;
  ShardMap start = ChooseStartMap(placement_, held, &empty);
  // Tasks without a map under a cluster that has one restarted unseen; tasks that never
  // answered are judged by the heartbeats.
  std::vector<TaskHealth> health(n, TaskHealth::kUp);
  for (int t = 0; t < n; ++t) {
    const HeartbeatMonitor::Health seen = options_.health(t);
    health[t] = held[t] || seen.up ? TaskHealth::kUp : TaskHealth::kDown;
    if (seen.incarnation != 0) known_[t] = seen.incarnation;
  }
  for (int t : empty) health[t] = TaskHealth::kRestarted;
  if (start.epoch > 1 || !empty.empty()) {
    LOG(INFO) << who_ << ": the servers hold " << start.Describe() << "; taking it on";
  }
  ASSIGN_OR_RETURN(replication::MapChange change, replication::NextMap(start, health, placement_));
  for (int s : change.lost) LOG(ERROR) << who_ << ": shard " << s << " lost every replica";
  {
    std::lock_guard<std::mutex> lock(mu_);
    map_ = change.map;
  }
  // Initialize, which follows, initialises or restores whatever head holds nothing.
  Publish();
  return Status::OK();
}

void ShardMaster::Watch() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void ShardMaster::Publish() {
  const ShardMap map = this->map();
  LOG(INFO) << who_ << ": " << map.Describe();
  routes_->Adopt(map);
  Message set = Get();
  set.map_epoch = map.epoch;
  set.chains = wire::ChainsOf(map);
  if (options_.prove) {
    Result<std::vector<wire::MapProof>> proofs = options_.prove(map);
    if (!proofs.ok()) {
      LOG(ERROR) << who_ << ": cannot prove map epoch " << map.epoch << ": "
                 << proofs.status().ToString();
      return;
    }
    set.map_proofs = std::move(proofs).value();
  }
  std::set<int> todo;
  for (int t = 0; t < map.num_shards(); ++t) {
    if (options_.health(t).up) todo.insert(t);
  }
  while (!todo.empty() && !stop_) {
    std::vector<std::pair<int, Message>> out;
    for (int t : todo) out.emplace_back(t, set);
    std::vector<Result<Message>> replies = connections_.Call(out, options_.call_timeout);
    for (size_t i = 0; i < out.size(); ++i) {
      const int t = out[i].first;
      if (replies[i].ok()) {
        todo.erase(t);
      } else if (replies[i].status().code() != StatusCode::kUnavailable) {
        // A refusal will not change by asking again: say so and go on.
        LOG(WARNING) << who_ << ": ps " << t << " refused map epoch " << map.epoch << ": "
                     << replies[i].status().ToString();
        todo.erase(t);
      } else if (!options_.health(t).up) {
        todo.erase(t);  // found down: it leaves the chains in the next map
      }
    }
  }
}

void ShardMaster::PollJoiners() {
  const ShardMap map = this->map();
  const std::vector<int> tasks = TasksToPoll(map);
  if (tasks.empty()) return;
  std::vector<std::pair<int, Message>> out;
  for (int t : tasks) out.emplace_back(t, Get());
  std::vector<Result<Message>> replies = connections_.Call(out, options_.call_timeout);
  std::vector<std::pair<int, Message>> answered;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (replies[i].ok()) answered.emplace_back(tasks[i], std::move(replies[i]).value());
  }
  std::vector<Promotion> promoted;
  ShardMap next = PromoteCaughtUp(map, answered, &promoted);
  if (promoted.empty()) return;
  for (const Promotion& p : promoted) {
    LOG(INFO) << who_ << ": ps " << p.task << " caught up with shard " << p.shard
              << ": a member of its chain from map epoch " << next.epoch;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    map_ = next;
  }
  Publish();
}

void ShardMaster::Run() {
  const int n = placement_.num_shards();
  auto next_poll = Clock::now();
  while (!stop_) {
    std::vector<HeartbeatMonitor::Health> seen;
    for (int t = 0; t < n; ++t) seen.push_back(options_.health(t));
    Result<replication::MapChange> change = DecideOnHealth(map(), placement_, seen, &known_);
    if (!change.ok()) {
      LOG(ERROR) << who_ << ": " << change.status().ToString();
    } else if (change->map.epoch != map().epoch) {
      for (int s : change->lost) LOG(ERROR) << who_ << ": shard " << s << " lost every replica";
      {
        std::lock_guard<std::mutex> lock(mu_);
        map_ = change->map;
      }
      Publish();
      for (int s : change->fresh) {
        if (options_.fresh) options_.fresh(s);
      }
    }
    if (Clock::now() >= next_poll) {
      PollJoiners();
      next_poll = Clock::now() + options_.joiner_poll;
    }
    std::this_thread::sleep_for(options_.watch_interval);
  }
}

}  // namespace worker
}  // namespace pstrain
