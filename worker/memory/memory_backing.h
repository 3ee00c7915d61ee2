// Where a GrowthAllocator gets its regions from: device memory (CudaBacking) on
// a GPU, or aligned host memory (HostBacking) so that the allocation policy can
// be tested on a CPU.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace pstrain {

class MemoryBacking {
 public:
  virtual ~MemoryBacking() = default;

  // Returns `bytes` of memory aligned to at least 256 bytes, or
  // ResourceExhausted.
  virtual Result<void *> Reserve(size_t bytes) = 0;
  // Gives back memory from Reserve(); `bytes` is the size that was reserved.
  virtual void Release(void *ptr, size_t bytes) = 0;
  // The memory the device has in all, which memory_fraction is a fraction of.
  virtual size_t total_memory() const = 0;
  // For messages: "cuda:0", "host memory".
  virtual std::string name() const = 0;
};

}  // namespace pstrain
