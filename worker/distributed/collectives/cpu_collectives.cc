#include "worker/distributed/collectives/cpu_collectives.h"

#include <algorithm>
#include <string>
#include <utility>

namespace pstrain {
CpuCollectivesContext::CpuCollectivesContext(int size) : size_(size), slots_(size) {
  CHECK_GT(size, 0) << "a collectives group needs at least one rank";
}

void CpuCollectivesContext::Barrier() {
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t generation = generation_;
  if (++waiting_ == size_) {
    waiting_ = 0;
    ++generation_;
    arrived_.notify_all();
    return;
  }
  arrived_.wait(lock, [&] { return generation_ != generation; });
}

Result<std::unique_ptr<CpuCollectives>> CpuCollectives::Create(
    std::shared_ptr<CpuCollectivesContext> context, int rank) {
  if (context == nullptr) return InvalidArgument("CpuCollectives needs a context, got null");
  if (rank < 0 || rank >= context->size()) {
    return InvalidArgument("rank must be in [0, " + std::to_string(context->size()) + "), got " +
                           std::to_string(rank));
  }
  return std::unique_ptr<CpuCollectives>(new CpuCollectives(std::move(context), rank));
}

Status CpuCollectives::Enter(const CpuCollectivesContext::Call& call) {
  context_->slot(rank_) = call;
  context_->Barrier();
  // Every rank runs the same checks over the same slots, so all agree on the outcome.
  std::vector<CollectiveCall> calls;
  for (int r = 0; r < size(); ++r) {
    const CpuCollectivesContext::Call& c = context_->slot(r);
    calls.push_back({c.op, c.n, c.root, c.in != nullptr && c.out != nullptr});
  }
  Status status = CheckCollectiveCalls(calls);
  if (!status.ok()) context_->Barrier();  // nobody reuses the slots until all have read them
  return status;
}

void CpuCollectives::AverageShard(const ShardRange& shard, float* out) {
  const float count = static_cast<float>(size());
  for (int64_t i = shard.begin; i < shard.end; ++i) {
    float sum = context_->slot(0).in[i];
    for (int r = 1; r < size(); ++r) sum += context_->slot(r).in[i];
    out[i - shard.begin] = sum / count;
  }
}

Status CpuCollectives::AllReduceAverage(float* data, int64_t n) {
  RETURN_IF_ERROR(Enter({CollectiveOp::kAllReduce, n, 0, data, data}));
  // Each rank averages its shard into a private buffer, then (after everyone has finished
  // reading the inputs) writes it into every rank's data.
  const ShardRange shard = ShardOf(n, size(), rank_);
  std::vector<float> averaged(shard.size());
  AverageShard(shard, averaged.data());
  context_->Barrier();
  for (int r = 0; r < size(); ++r) {
    std::copy(averaged.begin(), averaged.end(), context_->slot(r).out + shard.begin);
  }
  context_->Barrier();
  return Status::OK();
}

Status CpuCollectives::Broadcast(float* data, int64_t n, int root) {
  RETURN_IF_ERROR(Enter({CollectiveOp::kBroadcast, n, root, data, data}));
  if (rank_ != root && n > 0) std::copy(context_->slot(root).in, context_->slot(root).in + n, data);
  context_->Barrier();
  return Status::OK();
}

Status CpuCollectives::ReduceScatterAverage(const float* in, float* out_shard, int64_t n) {
  const ShardRange shard = ShardOf(n, size(), rank_);
  // An empty shard needs no output buffer.
  float* out = shard.size() == 0 && out_shard == nullptr ? const_cast<float*>(in) : out_shard;
  RETURN_IF_ERROR(Enter({CollectiveOp::kReduceScatter, n, 0, in, out}));
  AverageShard(shard, out_shard);
  context_->Barrier();
  return Status::OK();
}

Status CpuCollectives::AllGather(const float* shard_in, float* out, int64_t n) {
  const ShardRange own = ShardOf(n, size(), rank_);
  const float* in = own.size() == 0 && shard_in == nullptr ? out : shard_in;
  RETURN_IF_ERROR(Enter({CollectiveOp::kAllGather, n, 0, in, out}));
  for (int r = 0; r < size(); ++r) {
    const ShardRange shard = ShardOf(n, size(), r);
    std::copy(context_->slot(r).in, context_->slot(r).in + shard.size(), out + shard.begin);
  }
  context_->Barrier();
  return Status::OK();
}

}  // namespace pstrain
