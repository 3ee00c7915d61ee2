#include "common/wire/unix_read_count.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace pstrain {
namespace wire {
namespace {

constexpr int kDescriptors = 1 << 16;
// The top bit: an accept of this process returned the descriptor; the others: bytes read since.
constexpr uint64_t kAccepted = uint64_t{1} << 63;
std::atomic<uint64_t> counts[kDescriptors];

void Accepted(int fd) {
  if (fd >= 0 && fd < kDescriptors) counts[fd].store(kAccepted, std::memory_order_relaxed);
}

}  // namespace

std::optional<uint64_t> UnixBytesRead(int fd) {
  if (fd < 0 || fd >= kDescriptors) return std::nullopt;
  const uint64_t count = counts[fd].load(std::memory_order_relaxed);
  if ((count & kAccepted) == 0) return std::nullopt;
  return count & ~kAccepted;
}

}  // namespace wire
}  // namespace pstrain

extern "C" {

ssize_t recv(int fd, void* buffer, size_t size, int flags) {
  const long got = syscall(SYS_recvfrom, fd, buffer, size, flags, nullptr, nullptr);
  if (got > 0 && (flags & MSG_PEEK) == 0 && fd >= 0 && fd < pstrain::wire::kDescriptors) {
    pstrain::wire::counts[fd].fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
  }
  return got;
}

int accept4(int fd, sockaddr* address, socklen_t* size, int flags) {
  const int accepted = static_cast<int>(syscall(SYS_accept4, fd, address, size, flags));
  pstrain::wire::Accepted(accepted);
  return accepted;
}

int accept(int fd, sockaddr* address, socklen_t* size) { return accept4(fd, address, size, 0); }

}  // extern "C"
