#include "worker/collectives/bucketing.h"

#include <algorithm>
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

Status AllReduceAverageBucketed(Collectives& collectives, const std::vector<Tensor*>& tensors,
                                const std::vector<Bucket>& buckets) {
  std::vector<float> fusion;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
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
    fusion.resize(elements);
    CopyIntoFusionBuffer(bucket, tensors, fusion.data());
    RETURN_IF_ERROR(collectives.AllReduceAverage(fusion.data(), elements)
                        .WithContext("all-reduce of gradient bucket " + std::to_string(b)));
    CopyOutOfFusionBuffer(bucket, fusion.data(), tensors);
  }
  return Status::OK();
}

}  // namespace pstrain
