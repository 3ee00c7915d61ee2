// What this process has read from each Unix socket it accepted. The kernel counts the bytes
// received on each TCP connection (TCP_INFO), which is how the connection guard
// (connection_guard.h) knows what ZeroMQ holds of a peer's unfinished message; it keeps no such
// count for a Unix connection. So the process keeps it: this file defines recv(), accept() and
// accept4(), which ZeroMQ's shared library calls and which an executable's definitions take over
// (the dynamic linker looks in the executable first), and passes each to the kernel by its
// system call. A descriptor's count starts at zero when accept returns it and grows by what each
// recv() from it returns; a peek (MSG_PEEK) reads nothing away and is not counted. The cost is
// one relaxed atomic add per recv().
#pragma once

#include <cstdint>
#include <optional>

namespace pstrain {
namespace wire {

// The bytes read by recv() from `fd` since accept returned it, or nullopt when no accept of this
// process returned it (or it is beyond the table's 65,536 descriptors).
std::optional<uint64_t> UnixBytesRead(int fd);

}  // namespace wire
}  // namespace pstrain
