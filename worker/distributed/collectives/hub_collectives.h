// Collectives between worker processes on one host without GPUs: every rank sends its input to
// the host's hub (host_hub.h, served by the leader) and gets its output back. Results are
// bitwise those of CpuCollectives (the hub sums in rank order). Data pointers are host memory.
// Each rank heartbeats the hub from a thread of its own, so that the hub fails a collective
// within seconds when a rank's process dies, and a rank fails its call within seconds when
// the hub (the leader's process) dies, instead of waiting out the long timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/stop_signal.h"
#include "common/wire/transport.h"
#include "worker/distributed/collectives/collectives.h"

namespace pstrain {

struct HubCollectivesOptions {
  int rank = 0;
  int size = 1;
  // How long a call waits for the hub's reply (the slowest rank included) before failing
  // with Unavailable naming the hub: longer than the hub's own timeout, so that its message
  // naming the missing ranks comes first.
  std::chrono::milliseconds timeout{std::chrono::minutes(11)};
  std::chrono::milliseconds heartbeat_interval{1000};
  // A hub that has not answered a heartbeat for this long is taken for dead.
  std::chrono::milliseconds hub_silence_limit{5000};
};

class HubCollectives : public Collectives {
 public:
  // Connects in the background (the hub may start later). InvalidArgument for a rank outside
  // [0, size).
  static Result<std::unique_ptr<HubCollectives>> Connect(const std::string& hub_endpoint,
                                                         const HubCollectivesOptions& options,
                                                         const wire::Security& security = {});

  ~HubCollectives() override;
  HubCollectives(const HubCollectives&) = delete;
  HubCollectives& operator=(const HubCollectives&) = delete;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }

  Status AllReduceAverage(float* data, int64_t n) override;
  Status Broadcast(float* data, int64_t n, int root) override;
  Status ReduceScatterAverage(const float* in, float* out_shard, int64_t n) override;
  Status AllGather(const float* shard_in, float* out, int64_t n) override;

 private:
  HubCollectives() = default;
  // Sends `in_elements` floats at `in` (nothing when `in` is null) as this rank's part of
  // `call` and copies the hub's reply, which must hold `out_elements` floats, to `out`.
  Status Call(const CollectiveCall& call, const float* in, int64_t in_elements, float* out,
              int64_t out_elements);

  void Heartbeat();
  // Milliseconds since the hub last answered a heartbeat (since Connect before the first).
  int64_t HubSilenceMs() const;

  HubCollectivesOptions options_;
  std::string endpoint_;
  std::unique_ptr<wire::Connection> connection_;
  uint64_t next_request_id_ = 1;
  int64_t calls_ = 0;  // the number of the next call, the same on every rank
  std::unique_ptr<wire::Connection> heartbeat_connection_;  // the heartbeat thread's own
  std::atomic<int64_t> last_answer_ms_{0};                  // steady clock, ms
  StopSignal stop_;                                         // ends the heartbeat thread
  std::thread heartbeat_;
};

}  // namespace pstrain
