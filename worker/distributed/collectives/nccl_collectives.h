// Collectives over NCCL for the GPUs of one node. Ranks meet through a Store: rank 0 creates
// the NCCL unique id and sets it, the others get it. Every data pointer is device memory on
// the rank's GPU; each call is enqueued on the rank's stream and waited for before returning.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker/distributed/collectives/collectives.h"
#include "worker/distributed/collectives/rendezvous_store.h"

namespace pstrain {

struct NcclOptions {
  int rank = 0;
  int size = 1;
  int device = 0;                                // CUDA device ordinal of this rank
  std::string unique_id_key = "nccl_unique_id";  // the Store key rank 0 sets
  std::chrono::milliseconds timeout{60000};      // how long ranks wait for the unique id
};

class NcclCollectives : public Collectives {
 public:
  // Joins the group: every rank of options.size must call Create with its own rank.
  static Result<std::unique_ptr<NcclCollectives>> Create(Store& store, const NcclOptions& options);
  ~NcclCollectives() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // NCCL cannot see other ranks' arguments, so an n that differs across ranks is not detected.
  Status AllReduceAverage(float* data, int64_t n) override;
  Status Broadcast(float* data, int64_t n, int root) override;
  Status ReduceScatterAverage(const float* in, float* out_shard, int64_t n) override;
  Status AllGather(const float* shard_in, float* out, int64_t n) override;

  bool host_memory() const override { return false; }
  // ncclGroupStart/ncclGroupEnd: the calls between are launched together at GroupEnd, which
  // waits for them.
  Status GroupStart() override;
  Status GroupEnd() override;
  // Through a small device buffer of its own (cudaMalloc'd: the only device memory that does not
  // come from the worker's growth allocator, a few bytes).
  Status BroadcastFromHost(float* host_data, int64_t n, int root) override;

 private:
  NcclCollectives(int rank, int size, int device) : rank_(rank), size_(size), device_(device) {}
  // Makes this rank's device current; the calling thread may have another one selected.
  Status UseDevice();
  // Waits for the stream, except inside a group (GroupEnd waits for all of it).
  Status Synchronize(const char* op);

  int rank_;
  int size_;
  int device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool in_group_ = false;
  float* control_ = nullptr;  // device buffer for BroadcastFromHost
  int64_t control_elements_ = 0;
};

}  // namespace pstrain
