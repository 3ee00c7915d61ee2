// Aligned host memory as a MemoryBacking, with an optional artificial total so
// that tests can exercise a GrowthAllocator's limits without a GPU.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

#include "worker/memory/memory_backing.h"

namespace pstrain {

class HostBacking : public MemoryBacking {
 public:
  // A total_memory of 0 means the machine's physical memory; any other value is
  // enforced: Reserve fails once the reservations would exceed it.
  explicit HostBacking(size_t total_memory = 0);
  ~HostBacking() override;
  HostBacking(const HostBacking &) = delete;
  HostBacking &operator=(const HostBacking &) = delete;

  Result<void *> Reserve(size_t bytes) override;
  void Release(void *ptr, size_t bytes) override;
  size_t total_memory() const override { return total_memory_; }
  std::string name() const override { return "host memory"; }

  size_t bytes_reserved() const;
  // How many Reserve calls succeeded, so tests can count the regions an
  // allocator asked for.
  size_t num_reserves() const;

 private:
  const size_t total_memory_;
  mutable std::mutex mu_;
  size_t bytes_reserved_ = 0;
  size_t num_reserves_ = 0;
};

}  // namespace pstrain
