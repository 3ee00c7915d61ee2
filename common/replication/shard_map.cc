#include "common/replication/shard_map.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <set>

namespace pstrain {
namespace replication {
namespace {

// The host part of a --ps_hosts entry ("h:2222", "[::1]:2222"), loopback names folded into one,
// since every task on them shares one machine.
std::string HostOf(const std::string& entry) {
  std::string host = entry;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    host = host.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1") return "localhost";
  return host;
}

bool Contains(const std::vector<int>& tasks, int task) {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

void Erase(std::vector<int>* tasks, int task) {
  tasks->erase(std::remove(tasks->begin(), tasks->end(), task), tasks->end());
}

std::string TaskList(const std::vector<int>& tasks) {
  std::string out = "[";
  for (size_t i = 0; i < tasks.size(); ++i) {
    out += (i ? " ps" : "ps") + std::to_string(tasks[i]);
  }
  return out + "]";
}

Status CheckShapes(const ShardMap& map, const char* what) {
  if (map.joining.size() != map.chains.size()) {
    return InvalidArgument(std::string(what) + " has " + std::to_string(map.chains.size()) +
                           " chains but " + std::to_string(map.joining.size()) + " joining lists");
  }
  return Status();
}

}  // namespace

int ShardMap::head(int shard) const {
  CHECK(shard >= 0 && shard < num_shards()) << "shard " << shard << " of " << num_shards();
  return chains[shard].empty() ? -1 : chains[shard].front();
}

std::string ShardMap::Describe() const {
  std::string out = "map epoch " + std::to_string(epoch) + ":";
  for (int s = 0; s < num_shards(); ++s) {
    out += (s ? ", shard " : " shard ") + std::to_string(s) + " " + TaskList(chains[s]);
    if (s < static_cast<int>(joining.size()) && !joining[s].empty()) {
      out += " joining " + TaskList(joining[s]);
    }
  }
  return out;
}

Result<ShardMap> PlaceReplicas(const std::vector<std::string>& ps_hosts, int replicas) {
  const int n = static_cast<int>(ps_hosts.size());
  if (n == 0) return InvalidArgument("--ps_hosts is empty: replicas need at least one server");
  if (replicas < 0) {
    return InvalidArgument("--replicas must be >= 0, got " + std::to_string(replicas));
  }
  if (replicas >= n) {
    return InvalidArgument("--replicas=" + std::to_string(replicas) + " needs at least " +
                           std::to_string(replicas + 1) + " servers in --ps_hosts, got " +
                           std::to_string(n) + " (each shard's chain is 1+" +
                           std::to_string(replicas) + " distinct tasks)");
  }
  std::vector<std::string> host(n);
  for (int t = 0; t < n; ++t) {
    if (ps_hosts[t].empty()) {
      return InvalidArgument("--ps_hosts entry " + std::to_string(t) + " is empty");
    }
    host[t] = HostOf(ps_hosts[t]);
  }
  const size_t num_hosts = std::set<std::string>(host.begin(), host.end()).size();

  ShardMap map;
  map.epoch = 1;
  map.chains.resize(n);
  map.joining.resize(n);
  for (int s = 0; s < n; ++s) {
    std::vector<int>& chain = map.chains[s];
    chain.push_back(s);
    std::set<std::string> hosts_in{host[s]};
    // First the tasks on new hosts, then, where hosts run out, the rest in ring order.
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 1; i < n && static_cast<int>(chain.size()) < 1 + replicas; ++i) {
        const int t = (s + i) % n;
        if (Contains(chain, t) || (pass == 0 && hosts_in.count(host[t]))) continue;
        chain.push_back(t);
        hosts_in.insert(host[t]);
      }
    }
    std::map<std::string, int> on_host;
    for (int t : chain) ++on_host[host[t]];
    std::string shared;
    for (const auto& [h, count] : on_host) {
      if (count < 2) continue;
      shared += (shared.empty() ? "" : " and ") + std::to_string(count) + " replicas on host " + h;
    }
    if (!shared.empty()) {
      LOG(WARNING) << "shard " << s << " has " << shared << " (" << num_hosts << " hosts for 1+"
                   << replicas << " replicas)";
    }
  }
  return map;
}

Result<MapChange> NextMap(const ShardMap& map, const std::vector<TaskHealth>& health,
                          const ShardMap& placement) {
  RETURN_IF_ERROR(CheckShapes(map, "the shard map"));
  RETURN_IF_ERROR(CheckShapes(placement, "the placement"));
  const int n = map.num_shards();
  if (static_cast<int>(health.size()) != n || placement.num_shards() != n) {
    return InvalidArgument("a shard map of " + std::to_string(n) + " shards, a placement of " +
                           std::to_string(placement.num_shards()) + " and health of " +
                           std::to_string(health.size()) + " tasks: they must agree");
  }
  auto live = [&](int t) { return t >= 0 && t < n && health[t] != TaskHealth::kDown; };

  MapChange change;
  ShardMap& next = change.map;
  next = map;
  for (int s = 0; s < n; ++s) {
    std::vector<int>& chain = next.chains[s];
    std::vector<int>& joining = next.joining[s];
    const bool had_members = !chain.empty();
    // A restarted task leaves as a dead one does, and rejoins below.
    for (int t = 0; t < n; ++t) {
      if (health[t] != TaskHealth::kUp) {
        Erase(&chain, t);
        Erase(&joining, t);
      }
    }
    if (had_members && chain.empty()) change.lost.push_back(s);
    if (chain.empty()) {
      // Nothing left to copy from: the first live placed task starts the shard afresh, and any
      // joiner's partial copy goes with it.
      for (int t : placement.chains[s]) {
        if (!live(t)) continue;
        chain.push_back(t);
        Erase(&joining, t);
        change.fresh.push_back(s);
        break;
      }
    }
    if (chain.empty()) continue;
    for (int t : placement.chains[s]) {
      if (live(t) && !Contains(chain, t) && !Contains(joining, t)) joining.push_back(t);
    }
  }
  if (next.chains != map.chains || next.joining != map.joining) next.epoch = map.epoch + 1;
  return change;
}

Result<ShardMap> PromoteJoiner(const ShardMap& map, int shard, int task) {
  RETURN_IF_ERROR(CheckShapes(map, "the shard map"));
  if (shard < 0 || shard >= map.num_shards()) {
    return InvalidArgument("shard " + std::to_string(shard) + " is not in " + map.Describe());
  }
  if (!Contains(map.joining[shard], task)) {
    return InvalidArgument("ps" + std::to_string(task) + " is not joining shard " +
                           std::to_string(shard) + " in " + map.Describe());
  }
  if (map.chains[shard].empty()) {
    return InvalidArgument("shard " + std::to_string(shard) + " has no member for ps" +
                           std::to_string(task) + " to catch up with");
  }
  ShardMap next = map;
  Erase(&next.joining[shard], task);
  next.chains[shard].push_back(task);
  next.epoch = map.epoch + 1;
  return next;
}

}  // namespace replication
}  // namespace pstrain
