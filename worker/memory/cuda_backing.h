// Device memory of one CUDA GPU as a MemoryBacking: cudaMalloc/cudaFree, with
// the total from cudaMemGetInfo. Built only when PSTRAIN_HAVE_CUDA.
#pragma once

#include <memory>
#include <string>

#include "worker/memory/memory_backing.h"

namespace pstrain {

class CudaBacking : public MemoryBacking {
 public:
  // The number of GPUs the CUDA runtime sees; an error when the runtime or
  // driver cannot tell (no driver, no device), so callers can skip GPU work
  // with the reason.
  static Result<int> VisibleDeviceCount();
  static Result<std::unique_ptr<CudaBacking>> Create(int device);

  Result<void *> Reserve(size_t bytes) override;
  void Release(void *ptr, size_t bytes) override;
  size_t total_memory() const override { return total_memory_; }
  std::string name() const override { return "cuda:" + std::to_string(device_); }

 private:
  CudaBacking(int device, size_t total_memory) : device_(device), total_memory_(total_memory) {}

  const int device_;
  const size_t total_memory_;
};

}  // namespace pstrain
