#include "worker/distributed/collectives/rendezvous_store.h"

#include <utility>

namespace pstrain {

Status InMemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(table_->mutex);
    auto [it, inserted] = table_->values.emplace(key, value);
    // The same value again is a retry (or a restarted rank saying what it said before).
    if (!inserted && it->second != value) {
      return AlreadyExists("rank " + std::to_string(rank_) + " set store key '" + key +
                           "', which is already set; rendezvous keys are written once");
    }
  }
  table_->changed.notify_all();
  return Status::OK();
}

Result<std::string> InMemoryStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(Wait({key}, timeout));
  std::lock_guard<std::mutex> lock(table_->mutex);
  return table_->values.at(key);
}

Status InMemoryStore::Wait(const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout) {
  auto all_set = [&] {
    for (const std::string& key : keys) {
      if (table_->values.count(key) == 0) return false;
    }
    return true;
  };
  std::unique_lock<std::mutex> lock(table_->mutex);
  if (table_->changed.wait_for(lock, timeout, all_set)) return Status::OK();
  std::string missing;
  for (const std::string& key : keys) {
    if (table_->values.count(key) == 0) missing += (missing.empty() ? "'" : ", '") + key + "'";
  }
  return Unavailable("rank " + std::to_string(rank_) + " timed out after " +
                     std::to_string(timeout.count()) + " ms waiting for store key(s) " + missing +
                     " to be set");
}

}  // namespace pstrain
