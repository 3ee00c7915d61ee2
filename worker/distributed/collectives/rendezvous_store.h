// How ranks meet before they can talk (gloo's rendezvous::Store): a key-value store where a
// reader waits until a writer has set the key, e.g. rank 0 sets the NCCL unique id and the
// other ranks get it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` once; setting it to another value is AlreadyExists (a rendezvous value never
  // changes), to the same value again is OK (a retry, or a restarted rank).
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` is set and returns its value; Unavailable after `timeout`.
  virtual Result<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Waits until every key is set; Unavailable, naming the missing keys, after `timeout`.
  virtual Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

// The table that the InMemoryStore of every rank (thread) in one process shares.
struct InMemoryStoreTable {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> values;
};

// One rank's view of a shared in-memory table; its errors name the rank.
class InMemoryStore : public Store {
 public:
  InMemoryStore(std::shared_ptr<InMemoryStoreTable> table, int rank)
      : table_(std::move(table)), rank_(rank) {}

  Status Set(const std::string& key, const std::string& value) override;
  Result<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<InMemoryStoreTable> table_;
  int rank_;
};

}  // namespace pstrain
