#include "common/tf_config.h"

#include <nlohmann/json.hpp>

namespace pstrain {

namespace {

Status Bad(const std::string& what) { return InvalidArgument("TF_CONFIG: " + what); }

// cluster.<job>: a list of "host:port" strings (missing: empty).
Result<std::vector<std::string>> Hosts(const nlohmann::json& cluster, const std::string& job) {
  std::vector<std::string> hosts;
  if (!cluster.contains(job)) return hosts;
  const nlohmann::json& list = cluster[job];
  if (!list.is_array()) return Bad("cluster." + job + " must be a list of \"host:port\" strings");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = "cluster." + job + "[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return Bad(field + " must be a \"host:port\" string");
    const std::string entry = list[i].get<std::string>();
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size() ||
        entry.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return Bad(field + " '" + entry + "' is not host:port");
    }
    hosts.push_back(entry);
  }
  return hosts;
}

}  // namespace

Result<TfConfigRole> ParseTfConfig(const std::string& json) {
  const nlohmann::json config = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return Bad("not a JSON object (expected {\"cluster\": {...}, \"task\": {...}})");
  }
  if (!config.contains("cluster") || !config["cluster"].is_object()) {
    return Bad("cluster is missing or not an object of job -> [\"host:port\", ...]");
  }
  const nlohmann::json& cluster = config["cluster"];
  for (const auto& [job, unused] : cluster.items()) {
    if (job != "chief" && job != "master" && job != "worker" && job != "ps" && job != "evaluator") {
      return Bad("cluster." + job +
                 " is not a job pstrain knows (chief, worker, ps, evaluator; TF-1's master is the "
                 "chief)");
    }
  }
  TfConfigRole role;
  ASSIGN_OR_RETURN(std::vector<std::string> chief, Hosts(cluster, "chief"));
  ASSIGN_OR_RETURN(std::vector<std::string> master, Hosts(cluster, "master"));  // TF-1's chief
  chief.insert(chief.end(), master.begin(), master.end());
  ASSIGN_OR_RETURN(std::vector<std::string> workers, Hosts(cluster, "worker"));
  ASSIGN_OR_RETURN(role.ps_hosts, Hosts(cluster, "ps"));
  ASSIGN_OR_RETURN(std::vector<std::string> evaluators, Hosts(cluster, "evaluator"));
  if (chief.size() > 1) {
    return Bad("cluster.chief (with TF-1's cluster.master) has " + std::to_string(chief.size()) +
               " entries; at most one");
  }
  if (role.ps_hosts.empty()) return Bad("cluster.ps is missing or empty (pstrain needs a ps)");
  role.worker_hosts = chief;
  role.worker_hosts.insert(role.worker_hosts.end(), workers.begin(), workers.end());
  if (role.worker_hosts.empty()) return Bad("cluster has neither chief nor worker entries");
  role.evaluators = static_cast<int>(evaluators.size());

  if (!config.contains("task") || !config["task"].is_object()) {
    return Bad("task is missing or not an object {\"type\": ..., \"index\": ...}");
  }
  const nlohmann::json& task = config["task"];
  if (!task.contains("type") || !task["type"].is_string()) {
    return Bad("task.type is missing or not a string (chief, worker, ps or evaluator)");
  }
  std::string type = task["type"].get<std::string>();
  if (type == "master") type = "chief";  // TF-1's name for it
  int index = 0;
  if (task.contains("index")) {
    if (!task["index"].is_number_integer()) return Bad("task.index must be an integer");
    index = task["index"].get<int>();
  }
  const std::vector<std::string>* list = nullptr;
  if (type == "chief") {
    list = &chief;
    role.job_name = "worker";
  } else if (type == "worker") {
    list = &workers;
    role.job_name = "worker";
  } else if (type == "ps") {
    list = &role.ps_hosts;
    role.job_name = "ps";
  } else if (type == "evaluator") {
    list = &evaluators;
    role.job_name = "evaluator";
  } else {
    return Bad("task.type '" + type + "' is not chief, worker, ps or evaluator (or TF-1's master)");
  }
  // An evaluator needs no address of its own: TF lists it at most once.
  const size_t count = type == "evaluator" ? std::max<size_t>(1, list->size()) : list->size();
  if (index < 0 || static_cast<size_t>(index) >= count) {
    return Bad("task.index " + std::to_string(index) + " is out of range for " +
               std::to_string(list->size()) + " " + type + " task(s) in cluster." + type);
  }
  role.task_index = type == "worker" ? index + static_cast<int>(chief.size()) : index;
  return role;
}

}  // namespace pstrain
