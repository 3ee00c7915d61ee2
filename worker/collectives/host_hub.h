// The hub of a host's workers, served by its leader (local rank 0) on the leader's
// --worker_hosts port: the rendezvous store (zmq_store.h: the NCCL unique id, the agreed sync
// mode) and the meeting point of HubCollectives, the collectives of CPU workers in separate
// processes. Each collective call gathers every rank's input at the hub, which checks that all
// ranks made the same call, computes the result in rank order (bitwise what CpuCollectives
// gives) and replies to each rank with its output, as gloo's star algorithms do through
// rank 0. Bandwidth is not this hub's point: a GPU host uses NCCL; CPU hosts use the hub so
// that their workers push once per host.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/wire/transport.h"
#include "worker/collectives/collectives.h"
#include "worker/collectives/rendezvous_store.h"

namespace pstrain {

struct HostHubOptions {
  int size = 1;  // ranks in the group; a collective completes when all have called it
  // A collective that some rank has not joined this long after the first did fails, for the
  // ranks that came, with Unavailable naming the missing ranks.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

class HostHub {
 public:
  // Serves on `endpoint` ("tcp://*:2232") from a thread until destroyed.
  static Result<std::unique_ptr<HostHub>> Start(const std::string& endpoint,
                                                const HostHubOptions& options,
                                                const wire::Security& security = {});
  ~HostHub();
  std::string endpoint() const { return socket_->endpoint(); }

 private:
  struct Contribution {
    std::string peer;
    wire::Message request;
    CollectiveCall call;
  };
  struct Pending {
    std::vector<std::unique_ptr<Contribution>> ranks;  // by rank; null until it arrives
    int arrived = 0;
    std::chrono::steady_clock::time_point first;
  };

  HostHub() = default;
  void Serve();
  wire::Message AnswerStore(InMemoryStore& table, const wire::Message& m);
  // Files a rank's contribution; completes the collective once every rank's is in.
  void Collect(const std::string& peer, wire::Message m);
  // Checks and computes a complete collective and replies to every rank.
  void Complete(int64_t number, Pending& p);
  void FailAll(Pending& p, const Status& status);
  void ExpireLateCollectives();
  void ReplyTo(const std::string& peer, const wire::Message& reply);

  HostHubOptions options_;
  std::unique_ptr<wire::ServerSocket> socket_;
  std::shared_ptr<InMemoryStoreTable> table_ = std::make_shared<InMemoryStoreTable>();
  std::map<int64_t, Pending> pending_;  // by call number
  std::vector<uint64_t> incarnations_;  // each rank's process, once seen (0: not yet)
  Status broken_;                       // set once a rank restarted: the group must restart
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pstrain
