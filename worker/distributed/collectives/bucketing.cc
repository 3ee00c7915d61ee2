#include "worker/distributed/collectives/bucketing.h"

#include <algorithm>
#include <functional>
#include <string>

namespace pstrain {

Result<std::vector<Bucket>> AssignBuckets(const std::vector<int64_t>& tensor_elements,
                                          const BucketOptions& options) {
  if (options.max_bucket_bytes <= 0) {
    return InvalidArgument("max_bucket_bytes must be > 0, got " +
                           std::to_string(options.max_bucket_bytes));
  }
  std::vector<Bucket> buckets;
  Bucket current;
  for (size_t i = 0; i < tensor_elements.size(); ++i) {
    const int64_t elements = tensor_elements[i];
    if (elements < 0) {
      return InvalidArgument("tensor " + std::to_string(i) + " has " + std::to_string(elements) +
                             " elements; expected >= 0");
    }
    const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
    const int64_t current_bytes = current.num_elements * static_cast<int64_t>(sizeof(float));
    if (!current.tensor_indices.empty() && current_bytes + bytes > options.max_bucket_bytes) {
      buckets.push_back(std::move(current));
      current = Bucket();
    }
    current.tensor_indices.push_back(static_cast<int>(i));
    current.num_elements += elements;
  }
  if (!current.tensor_indices.empty()) buckets.push_back(std::move(current));
  return buckets;
}

void CopyIntoFusionBuffer(const Bucket& bucket, const std::vector<Tensor*>& tensors,
                          float* buffer) {
  for (int index : bucket.tensor_indices) {
    const Tensor& t = *tensors.at(index);
    std::copy(t.data(), t.data() + t.size(), buffer);
    buffer += t.size();
  }
}

void CopyOutOfFusionBuffer(const Bucket& bucket, const float* buffer,
                           const std::vector<Tensor*>& tensors) {
  for (int index : bucket.tensor_indices) {
    Tensor& t = *tensors.at(index);
    std::copy(buffer, buffer + t.size(), t.data());
    buffer += t.size();
  }
}

namespace {

// The bucket's element count, checked against its tensors.
Result<int64_t> CheckedElements(const Bucket& bucket, size_t b,
                                const std::vector<Tensor*>& tensors) {
  int64_t elements = 0;
  for (int index : bucket.tensor_indices) {
    if (index < 0 || index >= static_cast<int>(tensors.size()) || tensors[index] == nullptr) {
      return InvalidArgument("bucket " + std::to_string(b) + " names tensor " +
                             std::to_string(index) + ", but only " +
                             std::to_string(tensors.size()) + " non-null tensors were given");
    }
    elements += tensors[index]->size();
  }
  if (elements != bucket.num_elements) {
    return InvalidArgument("bucket " + std::to_string(b) + " expects " +
                           std::to_string(bucket.num_elements) + " elements, its tensors hold " +
                           std::to_string(elements));
  }
  return elements;
}

// Runs `op` (on a pointer and a count) once per bucket: over a host fusion buffer (filled
// before when `fill`, emptied into the tensors after), or, in device memory, on each tensor in one
// group call.
Status ForEachBucket(Collectives& collectives, const std::vector<Tensor*>& tensors,
                     const std::vector<Bucket>& buckets, const std::string& what, bool fill,
                     const std::function<Status(float*, int64_t)>& op) {
  std::vector<float> fusion;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
    ASSIGN_OR_RETURN(const int64_t elements, CheckedElements(bucket, b, tensors));
    const std::string context = what + " of bucket " + std::to_string(b);
    if (!collectives.host_memory()) {
      RETURN_IF_ERROR(collectives.GroupStart().WithContext(context));
      Status status;
      for (int index : bucket.tensor_indices) {
        status = op(tensors[index]->data(), tensors[index]->size());
        if (!status.ok()) break;
      }
      Status ended = collectives.GroupEnd();
      RETURN_IF_ERROR(status.WithContext(context));
      RETURN_IF_ERROR(ended.WithContext(context));
      continue;
    }
    if (bucket.tensor_indices.size() == 1) {  // alone in its bucket: no copies
      Tensor& t = *tensors[bucket.tensor_indices[0]];
      RETURN_IF_ERROR(op(t.data(), t.size()).WithContext(context));
      continue;
    }
    fusion.resize(elements);
    if (fill) CopyIntoFusionBuffer(bucket, tensors, fusion.data());
    RETURN_IF_ERROR(op(fusion.data(), elements).WithContext(context));
    CopyOutOfFusionBuffer(bucket, fusion.data(), tensors);
  }
  return Status::OK();
}

}  // namespace

Status AllReduceAverageBucketed(Collectives& collectives, const std::vector<Tensor*>& tensors,
                                const std::vector<Bucket>& buckets) {
  return ForEachBucket(
      collectives, tensors, buckets, "all-reduce", /*fill=*/true,
      [&](float* data, int64_t n) { return collectives.AllReduceAverage(data, n); });
}

Status BroadcastBucketed(Collectives& collectives, const std::vector<Tensor*>& tensors,
                         const std::vector<Bucket>& buckets, int root) {
  // Only the root's values matter: the other ranks skip filling the fusion buffer.
  const bool is_root = collectives.rank() == root;
  return ForEachBucket(
      collectives, tensors, buckets, "broadcast", /*fill=*/is_root,
      [&](float* data, int64_t n) { return collectives.Broadcast(data, n, root); });
}

}  // namespace pstrain
