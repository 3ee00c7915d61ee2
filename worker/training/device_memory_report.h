// The GPU allocator's statistics in the log and in TensorBoard (nothing on the CPU).
#pragma once

#include <cstdint>
#include <string>

#include "common/summary/summary_writer.h"
#include "worker/network/device_placement.h"

namespace pstrain {
namespace worker {

// On a GPU: logs the allocator's statistics (in use, peak, reserved, regions) and, when `log`
// is given, writes them as TensorBoard scalars under gpu_memory/. Nothing on the CPU.
void ReportDeviceMemory(const ComputeDevice& device, const std::string& who, int64_t step,
                        SummaryWriter* log);

}  // namespace worker
}  // namespace pstrain
