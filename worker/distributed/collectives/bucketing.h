// Gradient buckets (Horovod's tensor fusion, PyTorch DDP's buckets): small gradients are
// copied into one fusion buffer and all-reduced together, in the order backward produces them,
// so a few large collectives replace many small ones.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "worker/distributed/collectives/collectives.h"

namespace pstrain {

struct BucketOptions {
  // A bucket holds at most this many bytes, except that a tensor larger than the cap is
  // reduced alone in a bucket of its own.
  int64_t max_bucket_bytes = 25 << 20;
};

struct Bucket {
  std::vector<int> tensor_indices;  // into the list given to AssignBuckets, in that order
  int64_t num_elements = 0;         // floats in the fusion buffer
};

// Groups tensors of the given element counts (listed in backward order) into consecutive
// buckets. InvalidArgument for a negative count or a non-positive cap.
Result<std::vector<Bucket>> AssignBuckets(const std::vector<int64_t>& tensor_elements,
                                          const BucketOptions& options);

// Copies the bucket's tensors back to back into `buffer` (bucket.num_elements floats), and back.
void CopyIntoFusionBuffer(const Bucket& bucket, const std::vector<Tensor*>& tensors, float* buffer);
void CopyOutOfFusionBuffer(const Bucket& bucket, const float* buffer,
                           const std::vector<Tensor*>& tensors);

// Averages every tensor over the ranks of `collectives`, one all-reduce per bucket (in host
// memory through a fusion buffer; in device memory as one group call of the bucket's tensors).
Status AllReduceAverageBucketed(Collectives& collectives, const std::vector<Tensor*>& tensors,
                                const std::vector<Bucket>& buckets);
// Copies rank `root`'s tensors to every rank, one broadcast per bucket, fused the same way.
Status BroadcastBucketed(Collectives& collectives, const std::vector<Tensor*>& tensors,
                         const std::vector<Bucket>& buckets, int root);

}  // namespace pstrain
