#include "worker/network/cuda/gpu_context.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {
namespace cuda {

void StagingCopy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  if (bytes < 4 * kChunk) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < chunks; ++i) {
    const size_t at = static_cast<size_t>(i) * kChunk;
    std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at,
                std::min(kChunk, bytes - at));
  }
}

namespace {

// Each (from, to) pair of tensors as the bytes to copy: from's data into to's. Their sizes
// must agree (`what` names the direction when they do not).
std::vector<std::pair<const void*, std::pair<void*, size_t>>> ByteCopies(
    const std::vector<std::pair<const Tensor*, Tensor*>>& copies, const char* what) {
  std::vector<std::pair<const void*, std::pair<void*, size_t>>> bytes;
  for (const auto& [from, to] : copies) {
    CHECK_EQ(from->size(), to->size()) << what << " of " << to->shape().ToString();
    bytes.push_back({from->data(), {to->data(), from->bytes()}});
  }
  return bytes;
}

}  // namespace

std::string GpuDescription::ToString() const {
  std::ostringstream s;
  s << "cuda:" << index << " " << name << ", " << FormatBytes(total_memory)
    << ", compute capability " << major << "." << minor;
  return s.str();
}

Result<std::vector<GpuDescription>> ListVisibleGpus() {
  ASSIGN_OR_RETURN(const int count, CudaBacking::VisibleDeviceCount());
  std::vector<GpuDescription> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    const cudaError_t err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      return Unavailable("cudaGetDeviceProperties(" + std::to_string(i) +
                         ") failed: " + cudaGetErrorString(err));
    }
    gpus.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return gpus;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    memory_ = std::move(o.memory_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (ptr_) memory_->allocator->Free(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  memory_.reset();
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

void PinnedBuffer::Reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_) PSTRAIN_CUDA_CHECK(cudaFreeHost(data_));
  data_ = nullptr;
  PSTRAIN_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&data_), bytes, cudaHostAllocDefault));
  bytes_ = bytes;
}

Result<std::unique_ptr<GpuContext>> GpuContext::Create(const GpuOptions& options) {
  ASSIGN_OR_RETURN(std::vector<GpuDescription> gpus, ListVisibleGpus());
  if (options.device < 0 || options.device >= static_cast<int>(gpus.size())) {
    return FailedPrecondition("GPU " + std::to_string(options.device) + " is not visible (" +
                              std::to_string(gpus.size()) + " visible)");
  }
  std::unique_ptr<GpuContext> c(new GpuContext());
  c->description_ = gpus[options.device];
  c->options_ = options;
  c->memory_ = std::make_shared<DeviceMemory>();
  ASSIGN_OR_RETURN(c->memory_->backing, CudaBacking::Create(options.device));
  PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  PSTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy_stream_, cudaStreamNonBlocking));
  PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&c->uploaded_, cudaEventDisableTiming));
  PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&c->computed_, cudaEventDisableTiming));
  const cudnnStatus_t st = cudnnCreate(&c->cudnn_);
  if (st != CUDNN_STATUS_SUCCESS) {
    return Unavailable(std::string("cudnnCreate failed: ") + cudnnGetErrorString(st));
  }
  PSTRAIN_CUDNN_CHECK(cudnnSetStream(c->cudnn_, c->stream_));
  const cublasStatus_t bst = cublasCreate(&c->cublas_);
  if (bst != CUBLAS_STATUS_SUCCESS) {
    return Unavailable(std::string("cublasCreate failed: ") + cublasGetStatusString(bst));
  }
  PSTRAIN_CUBLAS_CHECK(cublasSetStream(c->cublas_, c->stream_));
  // Plain FP32 (no TF32 tensor cores), so that the GPU matches the CPU's float32 results,
  // unless TF32 is allowed.
  PSTRAIN_CUBLAS_CHECK(cublasSetMathMode(
      c->cublas_, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  // Last, so that the limit without growth leaves the libraries what they took above.
  GrowthAllocatorOptions ao;
  ao.allow_growth = options.allow_growth;
  ao.memory_fraction = options.memory_fraction;
  if (!options.allow_growth) {
    // Without growth the whole limit is reserved at once; the CUDA context, cuDNN and cuBLAS
    // already hold some memory, so take at most what is free less a margin for their own
    // allocations (TensorFlow likewise takes min(fraction x total, available)).
    constexpr size_t kMargin = size_t{512} << 20;
    size_t free_bytes = 0, total_bytes = 0;
    PSTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double usable =
        free_bytes > kMargin ? static_cast<double>(free_bytes - kMargin) / total_bytes : 0.0;
    if (usable < ao.memory_fraction) {
      LOG(WARNING) << "--gpu_memory_fraction=" << ao.memory_fraction << " of "
                   << FormatBytes(total_bytes) << " exceeds the free memory ("
                   << FormatBytes(free_bytes) << ", less " << FormatBytes(kMargin)
                   << " for CUDA libraries); reserving a fraction of " << usable;
      ao.memory_fraction = usable;
    }
    if (ao.memory_fraction <= 0.0) {
      return ResourceExhausted("only " + FormatBytes(free_bytes) + " of " +
                               FormatBytes(total_bytes) + " free on " + c->description_.ToString());
    }
  }
  auto allocator = GrowthAllocator::Create(c->memory_->backing.get(), ao);
  if (!allocator.ok()) return allocator.status().WithContext("the GPU allocator");
  c->memory_->allocator = std::move(allocator).value();
  return c;
}

GpuContext::~GpuContext() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (copy_stream_) cudaStreamSynchronize(copy_stream_);
  ones_.Reset();
  workspace_.Reset();
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (uploaded_) cudaEventDestroy(uploaded_);
  if (computed_) cudaEventDestroy(computed_);
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
  if (stream_) cudaStreamDestroy(stream_);
}

Result<DeviceBuffer> GpuContext::Allocate(size_t bytes) {
  ASSIGN_OR_RETURN(void* ptr, memory_->allocator->Allocate(bytes));
  return DeviceBuffer(memory_, ptr, bytes);
}

DeviceBuffer GpuContext::AllocateOrDie(size_t bytes, const std::string& what) {
  Result<DeviceBuffer> b = Allocate(bytes);
  CHECK(b.ok()) << "out of GPU memory for " << what << ": " << b.status().message()
                << " (raise --gpu_memory_fraction or lower the batch size)";
  return std::move(b).value();
}

Result<Tensor> GpuContext::NewTensor(const Shape& shape) {
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * sizeof(float);
  ASSIGN_OR_RETURN(void* ptr, memory_->allocator->Allocate(bytes));
  std::shared_ptr<DeviceMemory> memory = memory_;
  return Tensor::Wrap(shape, static_cast<float*>(ptr),
                      [memory, ptr] { memory->allocator->Free(ptr); });
}

Tensor GpuContext::NewTensorOrDie(const Shape& shape, const std::string& what) {
  Result<Tensor> t = NewTensor(shape);
  CHECK(t.ok()) << "out of GPU memory for " << what << " " << shape.ToString() << ": "
                << t.status().message() << " (raise --gpu_memory_fraction or lower the batch size)";
  return std::move(t).value();
}

void GpuContext::UploadStaged(const std::vector<RawCopy>& copies) {
  size_t total = 0;
  for (const auto& c : copies) total += (c.second.second + 255) / 256 * 256;
  if (total == 0) return;
  // The staging buffer may still feed the previous upload.
  PSTRAIN_CUDA_CHECK(cudaEventSynchronize(uploaded_));
  upload_staging_.Reserve(total);
  // The destinations may be memory that queued kernels still use (the allocator is not
  // stream-aware), so the copies start only after the compute stream's work so far.
  PSTRAIN_CUDA_CHECK(cudaEventRecord(computed_, stream_));
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, computed_, 0));
  std::vector<size_t> offsets(copies.size());
  for (size_t i = 0, offset = 0; i < copies.size(); ++i) {
    offsets[i] = offset;
    offset += (copies[i].second.second + 255) / 256 * 256;
  }
  // A model's variables come in many pieces: stage them all over the cores first. A few
  // pieces are staged one by one, each one's copy running while the next is staged.
  const bool many = copies.size() > 16;
  if (many) {
    const int64_t n = static_cast<int64_t>(copies.size());
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(upload_staging_.data() + offsets[i], copies[i].first, copies[i].second.second);
    }
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    const auto& [host, dst] = copies[i];
    char* staged = upload_staging_.data() + offsets[i];
    if (!many) StagingCopy(staged, host, dst.second);
    PSTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(dst.first, staged, dst.second, cudaMemcpyHostToDevice, copy_stream_));
  }
  PSTRAIN_CUDA_CHECK(cudaEventRecord(uploaded_, copy_stream_));
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream_, uploaded_, 0));
}

void GpuContext::DownloadStaged(
    const std::vector<std::pair<const void*, std::pair<void*, size_t>>>& copies) {
  // The async window's copies may still be writing the staging buffer.
  CHECK(!async_open_) << "a synchronous download inside BeginAsyncDownload/FinishAsyncDownload";
  size_t total = 0;
  for (const auto& c : copies) total += (c.second.second + 255) / 256 * 256;
  if (total == 0) return;
  download_staging_.Reserve(total);
  PSTRAIN_CUDA_CHECK(cudaEventRecord(computed_, stream_));
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, computed_, 0));
  size_t offset = 0;
  for (const auto& [device, dst] : copies) {
    PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(download_staging_.data() + offset, device, dst.second,
                                       cudaMemcpyDeviceToHost, copy_stream_));
    offset += (dst.second + 255) / 256 * 256;
  }
  PSTRAIN_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
  offset = 0;
  for (const auto& [device, dst] : copies) {
    StagingCopy(dst.first, download_staging_.data() + offset, dst.second);
    offset += (dst.second + 255) / 256 * 256;
  }
}

void GpuContext::Upload(const std::vector<std::pair<const Tensor*, Tensor*>>& copies) {
  UploadStaged(ByteCopies(copies, "upload"));
}

void GpuContext::UploadBytes(const void* host, void* device, size_t bytes) {
  UploadStaged({{host, {device, bytes}}});
}

void GpuContext::Download(const std::vector<std::pair<const Tensor*, Tensor*>>& copies) {
  DownloadStaged(ByteCopies(copies, "download"));
}

void GpuContext::BeginAsyncDownload(size_t total_bytes) {
  CHECK(!async_open_) << "BeginAsyncDownload twice without FinishAsyncDownload";
  // Room for every piece rounded up to 256 bytes, as the pieces are placed.
  const size_t capacity = total_bytes + 256 * 1024;
  download_staging_.Reserve(capacity);
  async_capacity_ = capacity;
  async_offset_ = 0;
  async_pieces_.clear();
  async_open_ = true;
}

void GpuContext::DownloadAsync(const Tensor* device, Tensor* host) {
  CHECK(async_open_) << "DownloadAsync outside BeginAsyncDownload/FinishAsyncDownload";
  CHECK_EQ(host->size(), device->size()) << "download of " << host->shape().ToString();
  const size_t bytes = host->bytes();
  CHECK_LE(async_offset_ + bytes, async_capacity_) << "async downloads beyond the bytes announced";
  PSTRAIN_CUDA_CHECK(cudaEventRecord(computed_, stream_));
  PSTRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, computed_, 0));
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(download_staging_.data() + async_offset_, device->data(),
                                     bytes, cudaMemcpyDeviceToHost, copy_stream_));
  async_pieces_.push_back({async_offset_, host});
  async_offset_ += (bytes + 255) / 256 * 256;
}

void GpuContext::FinishAsyncDownload() {
  CHECK(async_open_) << "FinishAsyncDownload without BeginAsyncDownload";
  PSTRAIN_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
  // A model's gradients come in many pieces: spread them over the cores.
  const int64_t pieces = static_cast<int64_t>(async_pieces_.size());
#pragma omp parallel for schedule(dynamic, 4) if (pieces > 16)
  for (int64_t i = 0; i < pieces; ++i) {
    const Piece& p = async_pieces_[i];
    std::memcpy(p.host->data(), download_staging_.data() + p.offset, p.host->bytes());
  }
  async_pieces_.clear();
  async_open_ = false;
}

void GpuContext::DownloadBytes(const void* device, void* host, size_t bytes) {
  DownloadStaged({{device, {host, bytes}}});
}

void* GpuContext::Workspace(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  if (bytes > workspace_.bytes()) {
    // Freeing the smaller one is safe: the allocator hands it out again only to work queued
    // after the kernels that used it, on this stream or behind its events.
    workspace_.Reset();
    workspace_ = AllocateOrDie(bytes, what + " cuDNN workspace");
  }
  return workspace_.data();
}

const float* GpuContext::Ones(int64_t n) {
  if (n > num_ones_) {
    const int64_t grown = std::max<int64_t>(n, 1024);
    ones_ = AllocateOrDie(grown * sizeof(float), "a vector of ones");
    Fill(ones_.as<float>(), grown, 1.0f, stream_);
    num_ones_ = grown;
  }
  return ones_.as<float>();
}

void GpuContext::Synchronize() { PSTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::function<Status()> GpuContext::Fence() {
  cudaEvent_t event = nullptr;
  PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  PSTRAIN_CUDA_CHECK(cudaEventRecord(event, stream_));
  std::shared_ptr<CUevent_st> owned(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
  return [owned]() -> Status {
    const cudaError_t err = cudaEventSynchronize(owned.get());
    if (err == cudaSuccess) return Status::OK();
    return Internal(std::string("waiting for the GPU's backward kernels: ") +
                    cudaGetErrorString(err));
  };
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
