// This process's resident memory as the kernel counts it (VmRSS in /proc/self/status): what a
// parameter server's TensorBoard run shows beside its table rows, so a shard that outgrows its
// host is seen before it is killed. And which malloc the process runs, for its logs.
#pragma once

#include <cstdint>

namespace pstrain {

// Resident bytes now; 0 where /proc cannot be read.
int64_t ResidentBytes();

// "jemalloc" where the binary was linked with it (CMakeLists.txt, pstrain_allocator: it keeps
// freed pages for 10 s, so resident memory stays near its peak that long), else "glibc malloc".
const char* AllocatorName();

}  // namespace pstrain
