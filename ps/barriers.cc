#include "ps/barriers.h"

#include <algorithm>

namespace pstrain {
namespace ps {

std::string Barriers::Participant(const wire::Message& m) {
  return (m.role == "evaluator" ? "evaluator " : "worker ") + std::to_string(m.task_index);
}

// A request's `value` must agree with the cluster's count (roles started with other flags).
Status Barriers::Check(const wire::Message& request) const {
  const ClusterSize& c = cluster_;
  if (c.workers == 0) {  // cluster unknown (servers built in-process): the first count holds
    auto it = by_name_.find(request.text);
    if (it == by_name_.end() || it->second.empty() ||
        it->second.front().request.value == request.value) {
      return Status::OK();
    }
    return InvalidArgument("barrier '" + request.text + "' waits for " +
                           std::to_string(it->second.front().request.value) +
                           " participants, but this request counts " +
                           std::to_string(request.value));
  }
  const int64_t expected = int64_t{c.workers} + c.evaluators;
  const std::string cluster = std::to_string(c.workers) + " worker(s) and " +
                              std::to_string(c.evaluators) +
                              " evaluator(s) (--worker_hosts, --evaluators)";
  if (request.role == "evaluator" && request.task_index >= c.evaluators) {
    return PermissionDenied("barrier '" + request.text + "' waits for the cluster's " + cluster +
                            "; evaluator " + std::to_string(request.task_index) +
                            " is not one of them");
  }
  if (request.value != expected && !elastic_) {  // elastic: live workers count
    return InvalidArgument("barrier '" + request.text + "' waits for the cluster's " +
                           std::to_string(expected) + " tasks, " + cluster +
                           ", but this request counts " + std::to_string(request.value) +
                           ": do all roles have the same --worker_hosts and --evaluators?");
  }
  return Status::OK();
}

Result<std::vector<Barriers::Wait>> Barriers::Arrive(const std::string& peer,
                                                     const wire::Message& request,
                                                     const Complete& complete) {
  RETURN_IF_ERROR(Check(request));
  const std::string me = Participant(request);
  auto same = [&](const Wait& w) { return Participant(w.request) == me; };
  if (auto it = by_name_.find(request.text); it != by_name_.end()) {
    it->second.erase(std::remove_if(it->second.begin(), it->second.end(), same), it->second.end());
  }
  int elsewhere = 0;
  for (const auto& [name, others] : by_name_) {
    elsewhere += static_cast<int>(std::count_if(others.begin(), others.end(), same));
  }
  if (elsewhere >= kMaxBarriersPerParticipant) {
    return ResourceExhausted(me + " already waits at " + std::to_string(elsewhere) +
                             " other barriers; a process waits at one at a time");
  }
  auto& waiting = by_name_[request.text];
  waiting.push_back({peer, request});
  if (!complete(waiting)) return std::vector<Wait>{};
  std::vector<Wait> released = std::move(waiting);
  by_name_.erase(request.text);
  return released;
}

std::vector<Barriers::Wait> Barriers::ReleaseComplete(const Complete& complete) {
  std::vector<Wait> released;
  for (auto it = by_name_.begin(); it != by_name_.end();) {
    if (!it->second.empty() && complete(it->second)) {
      for (Wait& w : it->second) released.push_back(std::move(w));
      it = by_name_.erase(it);
    } else {
      ++it;
    }
  }
  return released;
}

std::vector<Barriers::Wait> Barriers::TakeAll() {
  std::vector<Wait> all;
  for (auto& [name, waiting] : by_name_) {
    for (Wait& w : waiting) all.push_back(std::move(w));
  }
  by_name_.clear();
  return all;
}

size_t Barriers::waiting() const {
  size_t n = 0;
  for (const auto& [name, waiting] : by_name_) n += waiting.size();
  return n;
}

bool Barriers::FixedCountReached(const std::vector<Wait>& waiting) const {
  const int64_t expected = cluster_.workers > 0 ? int64_t{cluster_.workers} + cluster_.evaluators
                                                : waiting.front().request.value;
  return static_cast<int64_t>(waiting.size()) >= expected;
}

}  // namespace ps
}  // namespace pstrain
