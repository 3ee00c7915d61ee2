#include "worker/network/cuda/batch_prefetch.h"

#include <glog/logging.h>

#include "worker/network/cuda/check.h"

namespace pstrain {
namespace worker {
namespace cuda {

BatchPrefetch::BatchPrefetch(GpuContext* gpu) : gpu_(gpu) {
  PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
  PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
}

BatchPrefetch::~BatchPrefetch() {
  // The staging buffer and the device tensors may still feed an upload.
  if (stream_) cudaStreamSynchronize(stream_);
  if (uploaded_) cudaEventDestroy(uploaded_);
  if (computed_) cudaEventDestroy(computed_);
  if (stream_) cudaStreamDestroy(stream_);
}

void BatchPrefetch::Start(const Tensor& images, const std::vector<int32_t>& labels,
                          const std::string& who) {
  const int64_t batch = images.dim(0);
  CHECK_EQ(static_cast<int64_t>(labels.size()), batch) << who << ": labels of the next batch";
  // The staging buffer may still feed the last upload.
  PSTRAIN_CUDA_CHECK(cudaEventSynchronize(uploaded_));
  if (device_images_.shape() != images.shape()) {
    device_images_ = gpu_->NewTensorOrDie(images.shape(), who + ": next batch's images");
  }
  static_assert(sizeof(int32_t) == sizeof(float), "labels are stored in a float tensor");
  if (device_labels_.shape() != Shape{batch}) {
    device_labels_ = gpu_->NewTensorOrDie(Shape{batch}, who + ": next batch's labels");
  }
  const size_t label_offset = (images.bytes() + 255) / 256 * 256;
  const size_t label_bytes = labels.size() * sizeof(int32_t);
  staging_.Reserve(label_offset + label_bytes);
  StagingCopy(staging_.data(), images.data(), images.bytes());
  std::copy(labels.begin(), labels.end(), reinterpret_cast<int32_t*>(staging_.data() + label_offset));
  // The device tensors were read by kernels queued before now (the batch before last).
  PSTRAIN_CUDA_CHECK(cudaEventRecord(computed_, gpu_->stream()));
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream_, computed_, 0));
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_images_.data(), staging_.data(), images.bytes(),
                                     cudaMemcpyHostToDevice, stream_));
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_labels_.data(), staging_.data() + label_offset,
                                     label_bytes, cudaMemcpyHostToDevice, stream_));
  PSTRAIN_CUDA_CHECK(cudaEventRecord(uploaded_, stream_));
  pending_ = true;
  host_images_ = images.data();
  shape_ = images.shape();
  labels_ = labels;
}

bool BatchPrefetch::Take(const Tensor& images, const std::vector<int32_t>& labels,
                         Tensor* device_images, Tensor* device_labels) {
  if (!pending_ || images.data() != host_images_ || images.shape() != shape_ ||
      labels != labels_) {
    return false;
  }
  pending_ = false;
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(gpu_->stream(), uploaded_, 0));
  std::swap(*device_images, device_images_);
  std::swap(*device_labels, device_labels_);
  return true;
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
