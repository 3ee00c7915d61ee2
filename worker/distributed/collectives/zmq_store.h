// The rendezvous store across processes (as gloo's TCPStore and torch.distributed's TCPStore):
// the leader of a host's workers serves a key-value table from its HostHub (host_hub.h), and
// every rank (the leader too) sets and gets keys through it. This is how the NCCL unique id travels
// from the leader to the other ranks on the host. Keys are written once; a get waits, retrying,
// until its key is set.
#pragma once

#include <memory>
#include <string>

#include "common/wire/transport.h"
#include "worker/distributed/collectives/rendezvous_store.h"

namespace pstrain {

// One rank's client of the host's store, served by its HostHub (host_hub.h); its errors name the
// rank and the server.
class ZmqStore : public Store {
 public:
  // `set_timeout`: how long a Set waits for the server (the leader may start late).
  static Result<std::unique_ptr<ZmqStore>> Connect(
      const std::string& endpoint, int rank, const wire::Security& security = {},
      std::chrono::milliseconds set_timeout = std::chrono::milliseconds(60000));
  Status Set(const std::string& key, const std::string& value) override;
  Result<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  ZmqStore() = default;
  std::unique_ptr<wire::Connection> connection_;
  std::string endpoint_;
  int rank_ = 0;
  std::chrono::milliseconds set_timeout_{60000};
};

}  // namespace pstrain
