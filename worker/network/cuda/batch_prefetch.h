// The next training batch on its way to the GPU while the current step computes. Without it a
// step begins with the GPU idle: the batch is copied into pinned memory on the host, then
// uploaded (ResNet-50 at batch 64: 38.5 MB, a few ms of a 70 ms step on an H200). Start, called
// once the step's kernels are queued, does the host copy while they run and queues the upload on
// a stream of its own behind them; the Forward that reads the same batch Takes the device copy,
// and the compute stream waits for the upload only then.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "worker/network/cuda/gpu_context.h"

namespace pstrain {
namespace worker {
namespace cuda {

class BatchPrefetch {
 public:
  explicit BatchPrefetch(GpuContext* gpu);
  ~BatchPrefetch();
  BatchPrefetch(const BatchPrefetch&) = delete;
  BatchPrefetch& operator=(const BatchPrefetch&) = delete;

  // Starts copying `images` and `labels` (as int32 bits) to device tensors of this object's,
  // after the compute stream's work so far (which may still read those tensors). The host
  // tensors must keep their values until the Forward that reads them; `who` names the model in
  // an out-of-memory error. A batch started earlier and not taken is dropped.
  void Start(const Tensor& images, const std::vector<int32_t>& labels, const std::string& who);

  // Whether the batch in flight is `images` (the same host buffer and shape) with `labels`. If
  // so the compute stream waits for its upload, and its device tensors are swapped with
  // *device_images and *device_labels, whose old buffers the next Start fills.
  bool Take(const Tensor& images, const std::vector<int32_t>& labels, Tensor* device_images,
            Tensor* device_labels);

 private:
  GpuContext* gpu_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t computed_ = nullptr, uploaded_ = nullptr;
  PinnedBuffer staging_;
  Tensor device_images_, device_labels_;
  // The batch in flight: its host buffer, shape and labels.
  bool pending_ = false;
  const float* host_images_ = nullptr;
  Shape shape_;
  std::vector<int32_t> labels_;
};

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
