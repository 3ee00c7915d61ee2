#include "worker/distributed/shard_routes.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>

#include "common/wire/map_proof.h"
#include "common/wire/shard_map_message.h"

namespace pstrain {
namespace worker {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Message;

MapConnections::MapConnections(int num_tasks, Connector connect)
    : connect_(std::move(connect)), connections_(num_tasks) {}

MapConnections::~MapConnections() = default;

std::vector<Result<Message>> MapConnections::Call(const std::vector<std::pair<int, Message>>& out,
                                                  milliseconds timeout) {
  std::vector<Result<Message>> replies(out.size(), Unavailable("not sent"));
  std::vector<uint64_t> ids(out.size(), 0);
  std::vector<bool> waiting(out.size(), false);
  for (size_t i = 0; i < out.size(); ++i) {
    const int t = out[i].first;
    if (!connections_[t]) {
      Result<std::unique_ptr<wire::Connection>> c = connect_(t);
      if (!c.ok()) {
        replies[i] = c.status();
        continue;
      }
      connections_[t] = std::move(c).value();
    }
    Message m = out[i].second;
    m.request_id = ids[i] = next_id_++;
    Status sent = connections_[t]->Send(m);
    if (!sent.ok()) {
      replies[i] = sent;
      continue;
    }
    waiting[i] = true;
  }
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    bool any = false;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!waiting[i]) continue;
      any = true;
      Result<Message> r = connections_[out[i].first]->Receive(milliseconds(10));
      if (!r.ok()) continue;  // nothing yet, or unreadable: the deadline tells
      for (size_t j = 0; j < out.size(); ++j) {
        if (waiting[j] && out[j].first == out[i].first && ids[j] == r->request_id) {
          Status status = wire::StatusOfReply(*r);
          replies[j] =
              status.ok() ? Result<Message>(std::move(r).value()) : Result<Message>(status);
          waiting[j] = false;
          break;
        }
      }
    }
    if (!any) break;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!waiting[i]) continue;
    replies[i] = Unavailable("ps " + std::to_string(out[i].first) + " did not answer a " +
                             wire::MessageTypeName(out[i].second.type) + " within " +
                             std::to_string(timeout.count()) + " ms");
    connections_[out[i].first].reset();
  }
  return replies;
}

ShardRoutes::ShardRoutes(int num_tasks, int replicas, std::string role, int task_index,
                         MapConnections::Connector connect, MapCheck check)
    : num_tasks_(num_tasks),
      replicas_(replicas),
      role_(std::move(role)),
      task_index_(task_index),
      connections_(num_tasks, std::move(connect)),
      check_(std::move(check)) {
  map_.chains.resize(num_tasks);
  map_.joining.resize(num_tasks);
  for (int s = 0; s < num_tasks; ++s) map_.chains[s] = {s};
}

int ShardRoutes::Head(int shard) const {
  if (!replicated()) return shard;
  std::lock_guard<std::mutex> lock(mu_);
  return map_.head(shard);
}

uint64_t ShardRoutes::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.epoch;
}

replication::ShardMap ShardRoutes::map() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

void ShardRoutes::Observe(uint64_t epoch) {
  uint64_t seen = seen_.load();
  while (epoch > seen && !seen_.compare_exchange_weak(seen, epoch)) {
  }
}

bool ShardRoutes::Adopt(const replication::ShardMap& map) {
  std::lock_guard<std::mutex> lock(mu_);
  if (map.epoch <= map_.epoch || map.num_shards() != num_tasks_) return false;
  map_ = map;
  Observe(map.epoch);
  return true;
}

Result<bool> ShardRoutes::Fetch(const std::function<bool(int)>& live, milliseconds timeout) {
  std::lock_guard<std::mutex> fetching(fetch_mu_);
  std::vector<std::pair<int, Message>> out;
  for (int t = 0; t < num_tasks_; ++t) {
    if (!live(t)) continue;
    Message get;
    get.type = wire::MessageType::kShardMap;
    get.role = role_;
    get.task_index = task_index_;
    get.incarnation = wire::ProcessIncarnation();
    out.emplace_back(t, std::move(get));
  }
  std::vector<Result<Message>> replies = connections_.Call(out, timeout);
  std::optional<replication::ShardMap> best;
  std::string why;
  size_t failed = 0;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i].ok()) {
      ++failed;
      why += (why.empty() ? "" : "; ") + replies[i].status().ToString();
      continue;
    }
    if (replies[i]->map_epoch == 0) continue;  // no map there yet
    Result<replication::ShardMap> m = wire::MapOfMessage(*replies[i], num_tasks_, num_tasks_);
    if (m.ok() && check_) {
      if (Status proved = check_(*m, *replies[i]); !proved.ok()) m = proved;
    }
    if (!m.ok()) {
      LOG_EVERY_N(WARNING, 20) << role_ << " " << task_index_ << ": the shard map of ps "
                               << out[i].first << " is not followed: " << m.status().ToString();
      continue;
    }
    if (!best || m->epoch > best->epoch) best = std::move(m).value();
  }
  // Only proved epochs count as seen: a server claiming a higher one does not keep this client
  // fetching.
  seen_.store(best ? std::max(best->epoch, epoch()) : epoch());
  if (!best) {
    if (failed == 0 || failed < replies.size()) return false;
    return Unavailable("no server answered for its shard map: " + why);
  }
  if (!Adopt(*best)) return false;
  LOG(INFO) << role_ << " " << task_index_ << ": routes now follow " << best->Describe();
  return true;
}

ShardRoutes::MapCheck MapCheckOf(const wire::ClusterKeys& own) {
  if (!own.curve()) return {};
  return [own](const replication::ShardMap& map, const Message& reply) {
    return wire::CheckMapProof(map, reply.map_proofs, own);
  };
}

}  // namespace worker
}  // namespace pstrain
