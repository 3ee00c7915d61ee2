// Liveness of the parameter servers as a worker (or evaluator) sees it. A thread sends every
// server a heartbeat each interval on connections of its own; a server that has not answered
// for the timeout is logged as dead, by task and address, and its return (or its restart: a
// reply from a new incarnation) is logged too and bumps the server's generation, which tells
// PsClient to resend whatever it was still waiting for. Servers in turn log workers whose
// heartbeats stop (ps/server.h, CheckPeers).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/wire/transport.h"

namespace pstrain {
namespace worker {

struct HeartbeatOptions {
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{3000};  // silent this long: presumed dead
};

class HeartbeatMonitor {
 public:
  using Connector = std::function<Result<std::unique_ptr<wire::Connection>>(int server)>;

  // `servers` name the servers in logs ("ps 1 (10.0.0.2:2222)"); `role` and `task_index` are
  // this process's, as the servers know it.
  HeartbeatMonitor(std::vector<std::string> servers, std::string role, int task_index,
                   Connector connect, HeartbeatOptions options = {});
  // Stops the thread and tells every server this process is leaving (so that its silence is not
  // taken for a death).
  ~HeartbeatMonitor();

  Status Start();

  struct Health {
    bool up = true;            // answered within the timeout (or not yet overdue)
    int64_t generation = 0;    // bumped when the server comes back or restarts
    uint64_t incarnation = 0;  // of the server process last heard from (0: none yet)
    std::chrono::steady_clock::time_point down_since;  // when it was found dead
  };
  Health Of(int server) const;
  // The highest shard-map epoch any heartbeat reply carried (0: none; always 0 without
  // --replicas): a higher one than a client's own tells it to fetch the map.
  uint64_t highest_map_epoch() const { return highest_map_epoch_.load(); }
  // The highest global step any heartbeat reply carried (0: none yet): an evaluator between
  // evaluations sees the end of training from it within a heartbeat interval.
  int64_t highest_step() const { return highest_step_.load(); }

 private:
  struct Server {
    std::unique_ptr<wire::Connection> connection;
    std::chrono::steady_clock::time_point last_reply;
    Health health;
  };
  void Run();
  void Tick(std::chrono::steady_clock::time_point now);
  void Drain(int s, std::chrono::steady_clock::time_point now);
  void Reconnect(int s);
  wire::Message Heartbeat(const std::string& text) const;
  std::string Name(int s) const;

  std::vector<std::string> names_;
  std::string role_;
  int task_index_;
  Connector connect_;
  HeartbeatOptions options_;
  mutable std::mutex mu_;  // guards servers_[*].health
  std::vector<Server> servers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> highest_map_epoch_{0};
  std::atomic<int64_t> highest_step_{0};
  std::thread thread_;
};

}  // namespace worker
}  // namespace pstrain
