// Intra-node collectives behind one interface, as gloo does it: a CPU implementation (ranks as
// threads of one process) tests the multi-rank logic, and an NCCL one runs it on GPUs.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace pstrain {

// The half-open range [begin, end) of shard `rank` when n elements are split into `size`
// near-equal parts: the first n % size shards hold one element more than the others.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
inline ShardRange ShardOf(int64_t n, int size, int rank) {
  const int64_t base = n / size;
  const int64_t extra = n % size;
  const int64_t begin = rank * base + (rank < extra ? rank : extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

// The operations, and what one rank passed to one (for checking that all ranks agree).
enum class CollectiveOp { kAllReduce = 1, kBroadcast, kReduceScatter, kAllGather };
const char* CollectiveOpName(CollectiveOp op);  // "AllReduceAverage", ...
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int64_t n = 0;
  int root = 0;
  bool has_data = true;  // false: a data pointer was null (allowed only with nothing to move)
};

// OK when every rank's call (calls[r] is rank r's) is the same valid one; otherwise
// InvalidArgument naming the first rank that differs from rank 0 or passed a bad argument.
// Every rank checks the same calls, so all ranks fail alike and none is left waiting.
Status CheckCollectiveCalls(const std::vector<CollectiveCall>& calls);

// Every rank calls each method with the same arguments (n, root), in the same order. Data
// pointers are wherever the implementation works: host memory for CpuCollectives, device
// memory for NcclCollectives.
class Collectives {
 public:
  virtual ~Collectives() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[0, n) becomes the element-wise average over ranks, identical on every rank.
  virtual Status AllReduceAverage(float* data, int64_t n) = 0;
  // data[0, n) of rank `root` is copied into data on every other rank.
  virtual Status Broadcast(float* data, int64_t n, int root) = 0;
  // Rank r writes the average over ranks of in[ShardOf(n, size(), r)] into out_shard, which
  // holds ShardOf(n, size(), r).size() elements.
  virtual Status ReduceScatterAverage(const float* in, float* out_shard, int64_t n) = 0;
  // Rank r contributes shard_in (its shard ShardOf(n, size(), r)); every rank receives all
  // shards, in rank order, in out[0, n).
  virtual Status AllGather(const float* shard_in, float* out, int64_t n) = 0;

  // Whether data pointers are host memory (then several small tensors are fused by copying them
  // into one host buffer). False for device memory: their calls are grouped instead.
  virtual bool host_memory() const { return true; }
  // The calls between GroupStart and GroupEnd may run as one launch (NCCL group calls: several
  // tensors' all-reduces without fusion-buffer copies); GroupEnd returns once all are done.
  // By default each call runs when made.
  virtual Status GroupStart() { return Status::OK(); }
  virtual Status GroupEnd() { return Status::OK(); }
  // Broadcast of a few control values in host memory, whatever memory the data calls use.
  virtual Status BroadcastFromHost(float* host_data, int64_t n, int root) {
    return Broadcast(host_data, n, root);
  }
};

}  // namespace pstrain
