#include "worker/memory/host_backing.h"

#include <unistd.h>

#include <cstdlib>

namespace pstrain {
namespace {

constexpr size_t kHostAlignment = 256;

size_t PhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  CHECK(pages > 0 && page_size > 0) << "sysconf could not tell the physical memory size";
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

}  // namespace

HostBacking::HostBacking(size_t total_memory)
    : total_memory_(total_memory == 0 ? PhysicalMemory() : total_memory) {}

HostBacking::~HostBacking() {
  LOG_IF(WARNING, bytes_reserved_ != 0)
      << "HostBacking destroyed with " << bytes_reserved_ << " bytes still reserved";
}

Result<void *> HostBacking::Reserve(size_t bytes) {
  if (bytes == 0) return InvalidArgument("HostBacking::Reserve: bytes must be > 0, got 0");
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > total_memory_ - bytes_reserved_) {
    return ResourceExhausted("host memory: cannot reserve " + std::to_string(bytes) + " bytes, " +
                             std::to_string(bytes_reserved_) + " of " +
                             std::to_string(total_memory_) + " bytes already reserved");
  }
  const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void *ptr = std::aligned_alloc(kHostAlignment, rounded);
  if (ptr == nullptr) {
    return ResourceExhausted("host memory: aligned_alloc of " + std::to_string(rounded) +
                             " bytes failed");
  }
  bytes_reserved_ += bytes;
  ++num_reserves_;
  return ptr;
}

void HostBacking::Release(void *ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  CHECK_LE(bytes, bytes_reserved_) << "HostBacking::Release of more than was reserved";
  bytes_reserved_ -= bytes;
  std::free(ptr);
}

size_t HostBacking::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_reserved_;
}

size_t HostBacking::num_reserves() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_reserves_;
}

}  // namespace pstrain
