// One GPU as this process uses it: device 0 of the set CUDA_VISIBLE_DEVICES leaves visible, its
// cuDNN and cuBLAS handles, a compute stream and a copy stream, and the one GrowthAllocator
// that every byte of device memory comes from (TF's allow_growth and
// per_process_gpu_memory_fraction). Host/device copies go through pinned staging buffers on the
// copy stream, ordered against the compute stream with events.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "worker/memory/cuda_backing.h"
#include "worker/memory/growth_allocator.h"

namespace pstrain {
namespace worker {
namespace cuda {

struct GpuOptions {
  int device = 0;  // index within the visible set
  bool allow_growth = true;
  double memory_fraction = 1.0;
  // Convolution algorithms (conv_algorithm.h): timed per shape, or cuDNN's heuristics; only
  // deterministic ones.
  bool cudnn_autotune = true;
  bool cudnn_deterministic = false;
  // TF32 on the tensor cores in convolutions and matrix products (about 10 mantissa bits in
  // the products, FP32 sums); false: plain FP32, matching the CPU within float error.
  bool allow_tf32 = false;
  // The most scratch one convolution algorithm may use. TF_CUDNN_WORKSPACE_LIMIT_IN_MB's
  // default is 4 GiB, but timing takes the whole limit at once (a RefNet process peaked at
  // 4.7 GiB), and an H200 ran ResNet-50 as fast with 512 MiB (750 vs 760 img/s).
  size_t cudnn_workspace_limit = size_t{512} << 20;
  // Convolutions through cuDNN's graph API's engines (conv_graph.h) where one runs the shape;
  // false: the legacy API's algorithms only.
  bool cudnn_graph = true;
  // How many of the graph API's engine configs are timed per direction (the heuristics' ranked
  // list, then cuDNN's fallback list), and by how much the fastest must beat the legacy
  // algorithm's timed run to be taken (a graph call costs the host more than a legacy one).
  int cudnn_graph_candidates = 8;
  double cudnn_graph_margin = 0.1;
};

// What --log_device_placement prints about a GPU.
struct GpuDescription {
  int index = 0;
  std::string name;
  size_t total_memory = 0;
  int major = 0, minor = 0;  // compute capability
  // "cuda:0 NVIDIA H100 80GB HBM3, 79.1 GiB, compute capability 9.0"
  std::string ToString() const;
};

// Every GPU CUDA_VISIBLE_DEVICES leaves visible; an error when the runtime cannot tell.
Result<std::vector<GpuDescription>> ListVisibleGpus();

// The backing and the allocator together, shared by every buffer taken from them so that
// memory can be returned whatever order the owners go away in.
struct DeviceMemory {
  std::unique_ptr<CudaBacking> backing;
  std::unique_ptr<GrowthAllocator> allocator;
};

// Device memory from the context's allocator, given back when destroyed. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<DeviceMemory> memory, void* ptr, size_t bytes)
      : memory_(std::move(memory)), ptr_(ptr), bytes_(bytes) {}
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  void Reset();

 private:
  std::shared_ptr<DeviceMemory> memory_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Host memory from cudaHostAlloc (page-locked, so copies run asynchronously at full speed).
// Host copies into and out of pinned staging buffers over the cores: a model's worth of
// gradients (100 MB for ResNet-50) takes one core some 15 ms, the cores together a few.
void StagingCopy(void* dst, const void* src, size_t bytes);

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // Grows (dropping the contents) to at least `bytes`.
  void Reserve(size_t bytes);
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

class GpuContext {
 public:
  static Result<std::unique_ptr<GpuContext>> Create(const GpuOptions& options);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  const GpuDescription& description() const { return description_; }
  const GpuOptions& options() const { return options_; }
  cudaStream_t stream() const { return stream_; }  // every kernel runs here
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  GrowthAllocator* allocator() const { return memory_->allocator.get(); }

  // Device memory, or ResourceExhausted with the allocator's statistics.
  Result<DeviceBuffer> Allocate(size_t bytes);
  // As Allocate, for kernels that cannot return an error: out of memory stops the process with
  // the statistics and what to change (TensorFlow does the same).
  DeviceBuffer AllocateOrDie(size_t bytes, const std::string& what);
  // A tensor whose data() is device memory (never index it on the host); the memory goes back
  // to the allocator with the last copy of the tensor. Contents are undefined.
  Result<Tensor> NewTensor(const Shape& shape);
  Tensor NewTensorOrDie(const Shape& shape, const std::string& what);

  // Host -> device, each pair (host, device) of equal sizes; the compute stream waits for the
  // copies, the call does not.
  void Upload(const std::vector<std::pair<const Tensor*, Tensor*>>& copies);
  void UploadBytes(const void* host, void* device, size_t bytes);
  // Several (host, (device, bytes)) copies in one staging round (one wait, not one per copy).
  using RawCopy = std::pair<const void*, std::pair<void*, size_t>>;
  void UploadStaged(const std::vector<RawCopy>& copies);
  // Device -> host, each pair (device, host); waits for the compute stream's work so far and
  // returns once the host tensors hold the values.
  void Download(const std::vector<std::pair<const Tensor*, Tensor*>>& copies);
  void DownloadBytes(const void* device, void* host, size_t bytes);

  // Downloads that overlap compute (gradients while backward goes on): BeginAsyncDownload with
  // the bytes of every piece to come; DownloadAsync for each piece as soon as the kernels that
  // write it are queued (its copy starts, on the copy stream, once they finish, while later
  // kernels run); FinishAsyncDownload waits for the copies and fills the host tensors.
  void BeginAsyncDownload(size_t total_bytes);
  void DownloadAsync(const Tensor* device, Tensor* host);
  void FinishAsyncDownload();
  bool async_download_open() const { return async_open_; }

  // Scratch for cuDNN, shared by every layer (their kernels run in order on one stream), grown
  // to the largest request; null for 0 bytes. Out of memory stops the process naming `what`.
  void* Workspace(size_t bytes, const std::string& what);
  // At least n ones in device memory (bias gradients as a matrix-vector product).
  const float* Ones(int64_t n);
  // Waits for the compute stream.
  void Synchronize();
  // Records an event after the compute stream's work so far; the function returned waits for it
  // (from any thread), so another thread can start on results the kernels are still writing.
  std::function<Status()> Fence();

  AllocatorStats memory_stats() const { return memory_->allocator->stats(); }

 private:
  GpuContext() = default;
  void DownloadStaged(const std::vector<std::pair<const void*, std::pair<void*, size_t>>>& copies);

  GpuDescription description_;
  GpuOptions options_;
  std::shared_ptr<DeviceMemory> memory_;
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  cudaEvent_t uploaded_ = nullptr, computed_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  PinnedBuffer upload_staging_, download_staging_;
  struct Piece {
    size_t offset;
    Tensor* host;
  };
  std::vector<Piece> async_pieces_;
  size_t async_offset_ = 0, async_capacity_ = 0;
  bool async_open_ = false;
  DeviceBuffer ones_;
  DeviceBuffer workspace_;
  int64_t num_ones_ = 0;
};

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
