#include "worker/collectives/cpu_collectives.h"

#include <algorithm>
#include <string>
#include <utility>

namespace pstrain {
namespace {

enum Op { kAllReduce = 1, kBroadcast, kReduceScatter, kAllGather };

const char* OpName(int op) {
  switch (op) {
    case kAllReduce:
      return "AllReduceAverage";
    case kBroadcast:
      return "Broadcast";
    case kReduceScatter:
      return "ReduceScatterAverage";
    case kAllGather:
      return "AllGather";
  }
  return "unknown";
}

}  // namespace

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

Status CpuCollectives::Enter(const CpuCollectivesContext::Call& call, const char* op_name) {
  context_->slot(rank_) = call;
  context_->Barrier();
  // Every rank runs the same checks over the same slots, so all agree on the outcome.
  Status status;
  const CpuCollectivesContext::Call& first = context_->slot(0);
  for (int r = 0; r < size() && status.ok(); ++r) {
    const CpuCollectivesContext::Call& c = context_->slot(r);
    const std::string who = std::string(op_name) + " on rank " + std::to_string(r);
    if (c.op != first.op) {
      status = InvalidArgument(who + " met " + OpName(first.op) +
                               " on rank 0; every rank must call the same collective");
    } else if (c.n < 0) {
      status = InvalidArgument(who + ": n must be >= 0, got " + std::to_string(c.n));
    } else if (c.n != first.n) {
      status = InvalidArgument(who + ": n = " + std::to_string(c.n) + " but rank 0 passed n = " +
                               std::to_string(first.n) + "; every rank must pass the same n");
    } else if (c.op == kBroadcast && (c.root < 0 || c.root >= size())) {
      status = InvalidArgument(who + ": root must be in [0, " + std::to_string(size()) + "), got " +
                               std::to_string(c.root));
    } else if (c.root != first.root) {
      status = InvalidArgument(who + ": root = " + std::to_string(c.root) +
                               " but rank 0 passed root = " + std::to_string(first.root));
    } else if (c.n > 0 && (c.in == nullptr || c.out == nullptr)) {
      status = InvalidArgument(who + ": a data pointer is null with n = " + std::to_string(c.n));
    }
  }
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
  RETURN_IF_ERROR(Enter({kAllReduce, n, 0, data, data}, "AllReduceAverage"));
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
  RETURN_IF_ERROR(Enter({kBroadcast, n, root, data, data}, "Broadcast"));
  if (rank_ != root && n > 0) std::copy(context_->slot(root).in, context_->slot(root).in + n, data);
  context_->Barrier();
  return Status::OK();
}

Status CpuCollectives::ReduceScatterAverage(const float* in, float* out_shard, int64_t n) {
  const ShardRange shard = ShardOf(n, size(), rank_);
  // An empty shard needs no output buffer.
  float* out = shard.size() == 0 && out_shard == nullptr ? const_cast<float*>(in) : out_shard;
  RETURN_IF_ERROR(Enter({kReduceScatter, n, 0, in, out}, "ReduceScatterAverage"));
  AverageShard(shard, out_shard);
  context_->Barrier();
  return Status::OK();
}

Status CpuCollectives::AllGather(const float* shard_in, float* out, int64_t n) {
  const ShardRange own = ShardOf(n, size(), rank_);
  const float* in = own.size() == 0 && shard_in == nullptr ? out : shard_in;
  RETURN_IF_ERROR(Enter({kAllGather, n, 0, in, out}, "AllGather"));
  for (int r = 0; r < size(); ++r) {
    const ShardRange shard = ShardOf(n, size(), r);
    std::copy(context_->slot(r).in, context_->slot(r).in + shard.size(), out + shard.begin);
  }
  context_->Barrier();
  return Status::OK();
}

}  // namespace pstrain
