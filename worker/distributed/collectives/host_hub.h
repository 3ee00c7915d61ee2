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
#include <memory>
#include <string>
#include <thread>

#include "common/wire/transport.h"
#include "worker/distributed/collectives/hub_state.h"

namespace pstrain {

class HostHub {
 public:
  // Serves on `endpoint` ("tcp://*:2232"), and on `same_host` too unless empty (an ipc://
  // endpoint, common/wire/same_host.h), from a thread until destroyed.
  static Result<std::unique_ptr<HostHub>> Start(const std::string& endpoint,
                                                const HostHubOptions& options,
                                                const wire::Security& security = {},
                                                const std::string& same_host = "");
  ~HostHub();
  std::string endpoint() const { return socket_->endpoint(); }

 private:
  HostHub() = default;
  void Serve();

  std::unique_ptr<wire::ServerSocket> socket_;
  std::unique_ptr<HubState> state_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pstrain
