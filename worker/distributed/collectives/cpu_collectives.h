// Collectives for ranks that are threads of one process (gloo's test setup): ranks publish
// their buffers in a shared context and each rank reduces its own shard, summing in rank
// order 0..size-1, so every rank gets bitwise-identical results.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "worker/distributed/collectives/collectives.h"

namespace pstrain {

// What the ranks of one CPU group share: one slot per rank for the current call's arguments
// and a reusable barrier.
class CpuCollectivesContext {
 public:
  explicit CpuCollectivesContext(int size);

  int size() const { return size_; }

  // The arguments one rank passed to the current collective call.
  struct Call {
    CollectiveOp op = CollectiveOp::kAllReduce;
    int64_t n = 0;
    int root = 0;
    const float* in = nullptr;
    float* out = nullptr;
  };
  Call& slot(int rank) { return slots_[rank]; }
  // Blocks until all `size` ranks have arrived; reusable.
  void Barrier();

 private:
  int size_;
  std::vector<Call> slots_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  int waiting_ = 0;
  int64_t generation_ = 0;
};

class CpuCollectives : public Collectives {
 public:
  // InvalidArgument unless 0 <= rank < context->size().
  static Result<std::unique_ptr<CpuCollectives>> Create(
      std::shared_ptr<CpuCollectivesContext> context, int rank);

  int rank() const override { return rank_; }
  int size() const override { return context_->size(); }

  Status AllReduceAverage(float* data, int64_t n) override;
  Status Broadcast(float* data, int64_t n, int root) override;
  Status ReduceScatterAverage(const float* in, float* out_shard, int64_t n) override;
  Status AllGather(const float* shard_in, float* out, int64_t n) override;

 private:
  CpuCollectives(std::shared_ptr<CpuCollectivesContext> context, int rank)
      : context_(std::move(context)), rank_(rank) {}

  // Publishes this rank's arguments and checks every rank's, so that all ranks return the
  // same error (and none is left waiting at a barrier) when any rank's arguments are bad.
  Status Enter(const CpuCollectivesContext::Call& call);
  // The average over ranks of element i of every rank's `in`, summed in rank order.
  void AverageShard(const ShardRange& shard, float* out);

  std::shared_ptr<CpuCollectivesContext> context_;
  int rank_;
};

}  // namespace pstrain
