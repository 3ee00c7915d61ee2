// A worker's dataLease requests to server 0, whose data ledger lends chunks of the data
// (--elastic_data; docs/replication.md section 6, ps/data_ledger.h). The input pipeline leases
// from its reader thread while the training thread uses PsClient, so leases go over a
// connection of their own (same key, same route as PsClient's to server 0).
//
// Not yet: a lease whose reply is lost is granted all the same, and the chunk stays with this
// worker until it leaves (the ledger has no request numbers for leases, as it has for pushes).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/transport.h"
#include "worker/training/input/leased_source.h"

namespace pstrain {
namespace worker {

class DataLeaseClient {
 public:
  static Result<std::unique_ptr<DataLeaseClient>> Connect(const std::vector<std::string>& ps_hosts,
                                                          const std::string& role, int task_index,
                                                          const wire::ClusterKeys& curve);
  // One dataLease while reading `epoch`; the ledger's refusals keep their codes (OutOfRange,
  // Unavailable, ResourceExhausted, Aborted: see LeaseChunk), a lost reply is Unavailable.
  Result<data::ChunkLease> Lease(int64_t epoch);
  // For InputOptions::lease.
  LeaseChunk AsCallback() {
    return [this](int64_t epoch) { return Lease(epoch); };
  }

 private:
  DataLeaseClient() = default;
  std::mutex mutex_;
  std::unique_ptr<wire::Connection> server0_;
  std::string role_;
  int task_index_ = 0;
};

}  // namespace worker
}  // namespace pstrain
