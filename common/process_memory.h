// This process's resident memory as the kernel counts it (VmRSS in /proc/self/status): what a
// parameter server's TensorBoard run shows beside its table rows, so a shard that outgrows its
// host is seen before it is killed.
#pragma once

#include <cstdint>

namespace pstrain {

// Resident bytes now; 0 where /proc cannot be read.
int64_t ResidentBytes();

}  // namespace pstrain
