#include "worker/distributed/intra_node.h"

#include <glog/logging.h>

#include <map>
#include <set>

#include "common/enum_names.h"
#include "common/wire/listen_address.h"
#include "common/wire/same_host.h"
#include "worker/distributed/collectives/hub_collectives.h"
#if PSTRAIN_HAVE_NCCL
#include "worker/distributed/collectives/nccl_collectives.h"
#endif

namespace pstrain {
namespace worker {

constexpr EnumName<IntraNodeSync> kIntraNodeSyncs[] = {
    {IntraNodeSync::kOff, "off"}, {IntraNodeSync::kCpu, "cpu"}, {IntraNodeSync::kNccl, "nccl"}};

Result<IntraNodeSync> ParseIntraNodeSync(const std::string& value) {
  return ValueNamed(kIntraNodeSyncs, value, "--intra_node_sync");
}

const char* IntraNodeSyncName(IntraNodeSync mode) { return NameOf(kIntraNodeSyncs, mode); }

int NumPushers(const std::vector<std::string>& worker_hosts, IntraNodeSync mode) {
  if (mode == IntraNodeSync::kOff) return static_cast<int>(worker_hosts.size());
  std::set<std::string> hosts;
  for (const std::string& entry : worker_hosts) hosts.insert(entry.substr(0, entry.rfind(':')));
  return static_cast<int>(hosts.size());
}

namespace {

std::string PortOf(const std::string& host_port) {
  return host_port.substr(host_port.rfind(':') + 1);
}

// The hub's CURVE settings. The leader serves with its own key pair and lets in the workers of
// its own host only (no other host's worker, no evaluator). Every rank, the leader too, connects
// as a client with its own key pair, trusting the leader's public key.
struct HubKeys {
  wire::Security server;  // the leader's hub
  wire::Security client;  // every rank's connections to it
};

Result<HubKeys> HubSecurity(const wire::ClusterKeys& keys, const HostGroup& g) {
  HubKeys hub;
  if (!keys.curve()) return hub;
  if (g.is_leader()) {
    hub.server = keys.ForServer();
    std::map<std::string, std::string> host_workers;
    for (int task : g.tasks) {
      for (const auto& [key, name] : hub.server.client_keys) {
        if (name == "worker-" + std::to_string(task)) host_workers[key] = name;
      }
    }
    hub.server.client_keys = std::move(host_workers);
  }
  const std::string leader = "worker-" + std::to_string(g.leader());
  hub.client.own = keys.own;
  hub.client.own_name = keys.own_name;
  for (const auto& [key, name] : keys.client_keys) {
    if (name == leader) hub.client.server_key = key;
  }
  if (hub.client.server_key.empty()) {
    return FailedPrecondition("no public key for " + leader + " (the host's leader) in " +
                              keys.dir + "; are the keys from another cluster?");
  }
  return hub;
}

// Every rank publishes its mode and model and checks the others' (NCCL cannot see a rank
// averaging tensors of other sizes; it would hang or mix them).
Status CompareModes(Store& store, const HostGroup& g, const std::string& mine, IntraNodeSync mode,
                    std::chrono::milliseconds timeout) {
  for (int r = 0; r < g.size(); ++r) {
    Result<std::string> theirs = store.Get("mode/" + std::to_string(r), timeout);
    if (!theirs.ok()) {
      return theirs.status().WithContext("waiting for worker " + std::to_string(g.tasks[r]) +
                                         " (local rank " + std::to_string(r) +
                                         ") to join the host's sync group");
    }
    // With cpu, a GPU worker and a CPU worker may sync (both through host memory).
    auto without_device = [](const std::string& s) {
      const size_t on = s.find(" on "), with = s.find(" with ");
      if (on == std::string::npos || with == std::string::npos) return s;
      return s.substr(0, on) + s.substr(with);
    };
    if (mode == IntraNodeSync::kNccl ? *theirs != mine
                                     : without_device(*theirs) != without_device(mine)) {
      return FailedPrecondition("the workers on host " + g.host + " disagree: this one syncs " +
                                mine + ", worker " + std::to_string(g.tasks[r]) + " " + *theirs +
                                " (give every worker of the host the same --intra_node_sync, "
                                "config, --overlap_push and --push_part_mb)");
    }
  }
  return Status::OK();
}

// The leader's hub holds the store: it stays up until every other rank has read every mode,
// so that a rank told "disagree" by the leader hears it too, rather than timing out on a hub
// the leader closed on its way out.
Status AgreeOnMode(Store& store, const HostGroup& g, IntraNodeSync mode, Device device,
                   const std::string& model, std::chrono::milliseconds timeout) {
  const std::string mine = std::string(IntraNodeSyncName(mode)) + " on " +
                           (device == Device::kGpu ? "gpu" : "cpu") + " with " + model;
  RETURN_IF_ERROR(store.Set("mode/" + std::to_string(g.local_rank), mine));
  const Status agreed = CompareModes(store, g, mine, mode, timeout);
  if (!g.is_leader()) {
    RETURN_IF_ERROR(store.Set("read/" + std::to_string(g.local_rank), "1"));
    return agreed;
  }
  // A rank the leader timed out on is not waited for again.
  if (!agreed.ok() && agreed.code() != StatusCode::kFailedPrecondition) return agreed;
  for (int r = 1; r < g.size(); ++r) {
    const Status read = store.Get("read/" + std::to_string(r), timeout).status();
    if (!read.ok() && agreed.ok()) return read;
  }
  return agreed;
}

}  // namespace

Result<std::unique_ptr<IntraNodeGroup>> JoinIntraNodeGroup(const IntraNodeOptions& o,
                                                           const std::string& who) {
  if (o.mode == IntraNodeSync::kOff) return std::unique_ptr<IntraNodeGroup>();
  ASSIGN_OR_RETURN(HostGroup g, HostGroupOf(o.worker_hosts, o.task_index));
  if (g.size() == 1) {
    LOG(INFO) << who << ": alone on host " << g.host
              << "; --intra_node_sync=" << IntraNodeSyncName(o.mode) << " has nothing to sync";
    return std::unique_ptr<IntraNodeGroup>();
  }
  if (o.mode == IntraNodeSync::kNccl) {
    if (o.device != Device::kGpu) {
      return FailedPrecondition(who +
                                ": --intra_node_sync=nccl needs a worker on a GPU, and this one "
                                "computes on the CPU (see the device line above; use "
                                "--intra_node_sync=cpu or give it a GPU)");
    }
#if !PSTRAIN_HAVE_NCCL
    return FailedPrecondition(who +
                              ": --intra_node_sync=nccl, but this binary was built without "
                              "NCCL (see the cmake log; set NCCL_ROOT)");
#endif
  }
  auto joined = std::make_unique<IntraNodeGroup>();
  joined->group = g;
  joined->mode = o.mode;
  ASSIGN_OR_RETURN(HubKeys keys, HubSecurity(o.curve, g));
  const bool curve = keys.client.curve();
  const std::string leader_entry = o.worker_hosts[g.leader()];
  // Every rank is on the leader's host: with keys, they meet on a Unix socket beside the
  // leader's (common/wire/same_host.h) rather than over CURVE; TCP stays open as before.
  const std::string same_host = wire::SameHostHubEndpoint(o.curve, g.leader());
  if (g.is_leader()) {
    HostHubOptions hub;
    hub.size = g.size();
    hub.timeout = o.timeout;
    if (curve) {
      for (int task : g.tasks) hub.rank_keys.push_back("worker-" + std::to_string(task));
    }
    ASSIGN_OR_RETURN(std::string listen,
                     wire::ListenEndpoint(leader_entry, curve, o.insecure, who));
    auto started = HostHub::Start(listen, hub, keys.server, same_host);
    if (!started.ok()) {
      return started.status().WithContext(who + ": serving the host's hub on port " +
                                          PortOf(leader_entry) + " (its --worker_hosts entry)");
    }
    joined->hub = std::move(started).value();
  }
  const std::string endpoint = same_host.empty() ? wire::TcpEndpoint(leader_entry) : same_host;
  ASSIGN_OR_RETURN(joined->store,
                   ZmqStore::Connect(endpoint, g.local_rank, keys.client, o.timeout));
  RETURN_IF_ERROR(
      AgreeOnMode(*joined->store, g, o.mode, o.device, o.model, o.timeout).WithContext(who));
  if (o.mode == IntraNodeSync::kCpu) {
    HubCollectivesOptions c;
    c.rank = g.local_rank;
    c.size = g.size();
    c.timeout = o.timeout + std::chrono::minutes(1);
    ASSIGN_OR_RETURN(joined->collectives, HubCollectives::Connect(endpoint, c, keys.client));
  } else {
#if PSTRAIN_HAVE_NCCL
    NcclOptions n;
    n.rank = g.local_rank;
    n.size = g.size();
    n.device = 0;  // the first GPU CUDA_VISIBLE_DEVICES leaves this worker
    n.timeout = o.timeout;
    auto created = NcclCollectives::Create(*joined->store, n);
    if (!created.ok()) return created.status().WithContext(who + ": joining the host's NCCL group");
    joined->collectives = std::move(created).value();
#endif
  }
  std::string tasks;
  for (int t : g.tasks) tasks += (tasks.empty() ? "" : ",") + std::to_string(t);
  LOG(INFO) << who << ": syncs with workers [" << tasks << "] on host " << g.host << " over "
            << (o.mode == IntraNodeSync::kNccl ? "NCCL" : "the host hub (host memory)")
            << " as local rank " << g.local_rank << " of " << g.size() << "; "
            << (g.is_leader()
                    ? "it pushes the host's average to the servers"
                    : "worker " + std::to_string(g.leader()) + " (the leader) pushes for the host");
  return joined;
}

}  // namespace worker
}  // namespace pstrain
