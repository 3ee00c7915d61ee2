#include "ps/permissions.h"

#include <algorithm>

namespace pstrain {
namespace ps {

using wire::MessageType;

namespace {

// "worker-1" -> {"worker", 1}; false for anything else.
bool ParseKeyName(const std::string& name, std::string* job, int* task) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == name.size() ||
      name.find_first_not_of("0123456789", dash + 1) != std::string::npos ||
      name.size() - dash > 8) {
    return false;
  }
  *job = name.substr(0, dash);
  *task = std::stoi(name.substr(dash + 1));
  return true;
}

bool IsRole(const std::string& role) {
  return role == "worker" || role == "chief" || role == "evaluator" || role == "ps";
}

}  // namespace

Result<Sender> IdentifySender(const std::string& identity, const wire::Message& request,
                              const ClusterSize& cluster) {
  // Built only for a refusal: this runs on every request.
  auto claim = [&] { return "'" + request.role + "' task " + std::to_string(request.task_index); };
  if (!IsRole(request.role) || request.task_index < 0) {
    return PermissionDenied(
        "a request must name its sender (worker, chief, evaluator or ps, and a "
        "task index >= 0); this one names " +
        claim());
  }
  if (request.role == "chief" && request.task_index != 0) {
    return PermissionDenied("only worker 0 is the chief; this request claims " + claim());
  }
  if (request.role == "ps" && cluster.servers > 0 && request.task_index >= cluster.servers) {
    return PermissionDenied("the request claims " + claim() + ", but the cluster has " +
                            std::to_string(cluster.servers) + " ps task(s) (--ps_hosts)");
  }
  if (cluster.workers > 0 && request.role != "ps") {
    const bool evaluator = request.role == "evaluator";
    const int tasks = evaluator ? std::max(1, cluster.evaluators) : cluster.workers;
    if (request.task_index >= tasks) {
      return PermissionDenied("the request claims " + claim() + ", but the cluster has " +
                              std::to_string(tasks) + (evaluator ? " evaluator" : " worker") +
                              " task(s) (" + (evaluator ? "--evaluators" : cluster.workers_flag) +
                              ")");
    }
  }
  Sender sender{request.role, request.task_index, !identity.empty()};
  if (identity.empty()) return sender;
  std::string job;
  int task = -1;
  if (!ParseKeyName(identity, &job, &task)) {
    return PermissionDenied("the connection's key belongs to '" + identity +
                            "', which is no worker, evaluator or ps");
  }
  const std::string key_job = request.role == "chief" ? "worker" : request.role;
  if (job != key_job || task != request.task_index) {
    return PermissionDenied("the request claims to come from " + claim() + " but its key is " +
                            identity + "'s");
  }
  return sender;
}

Status Authorize(const Sender& sender, const wire::Message& request) {
  const bool ps = sender.role == "ps";
  const bool chief = sender.role == "chief";
  const bool worker = chief || sender.role == "worker";
  bool allowed = true;
  std::string what = wire::MessageTypeName(request.type);
  switch (request.type) {
    case MessageType::kHeartbeat:
    case MessageType::kPull:
    case MessageType::kRowPull:
    case MessageType::kBarrier:
      allowed = !ps;
      break;
    case MessageType::kRegister:
      // Asking whether the variables are ready is anyone's; giving them values the chief's.
      allowed = (request.tensors.empty() && !ps) || chief;
      if (!request.tensors.empty()) what = "register with initial values";
      break;
    case MessageType::kPush:
    case MessageType::kRowPush:
    case MessageType::kDataLease:
      allowed = worker;
      break;
    case MessageType::kCheckpoint:
    case MessageType::kRestore:
    case MessageType::kShutdown:
      allowed = chief;
      break;
    case MessageType::kReplicate:
    case MessageType::kReplicaCopy:
      allowed = ps;
      break;
    case MessageType::kShardMap:
      // Getting the map is anyone's; setting it (a request with chains) the chief's, the master.
      allowed = (request.chains.empty() && !ps) || chief;
      if (!request.chains.empty()) what = "shard map with chains (setting the map)";
      break;
    default:  // replies, and the host hub's requests, are no server's to answer
      return PermissionDenied(what + " is not a request a parameter server takes");
  }
  if (allowed) return Status::OK();
  const bool replication =
      request.type == MessageType::kReplicate || request.type == MessageType::kReplicaCopy;
  const char* why =
      ps            ? " (a parameter server may only send replicate and replica copy)"
      : replication ? " (only a parameter server may, to the next in its chain)"
      : worker      ? " (only the chief, worker 0, may)"
                    : " (an evaluator may only pull, pull rows, heartbeat and wait at barriers)";
  return PermissionDenied(sender.Name() + " may not send " + what + why);
}

}  // namespace ps
}  // namespace pstrain
