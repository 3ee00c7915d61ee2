// Collectives between worker processes on one host without GPUs: every rank sends its input to
// the host's hub (host_hub.h, served by the leader) and gets its output back. Results are
// bitwise those of CpuCollectives (the hub sums in rank order). Data pointers are host memory.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/wire/transport.h"
#include "worker/collectives/collectives.h"

namespace pstrain {

struct HubCollectivesOptions {
  int rank = 0;
  int size = 1;
  // How long a call waits for the hub's reply (the slowest rank included) before failing
  // with Unavailable naming the hub: longer than the hub's own timeout, so that its message
  // naming the missing ranks comes first.
  std::chrono::milliseconds timeout{std::chrono::minutes(11)};
};

class HubCollectives : public Collectives {
 public:
  // Connects in the background (the hub may start later). InvalidArgument for a rank outside
  // [0, size).
  static Result<std::unique_ptr<HubCollectives>> Connect(const std::string& hub_endpoint,
                                                         const HubCollectivesOptions& options,
                                                         const wire::Security& security = {});

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

  HubCollectivesOptions options_;
  std::unique_ptr<wire::Connection> connection_;
  int64_t calls_ = 0;  // the number of the next call, the same on every rank
};

}  // namespace pstrain
