#include "worker/training/device_memory_report.h"

#include "worker/memory/growth_allocator.h"

namespace pstrain {
namespace worker {

void ReportDeviceMemory(const ComputeDevice& device, const std::string& who, int64_t step,
                        SummaryWriter* log) {
  AllocatorStats s;
  if (!device.MemoryStats(&s)) return;
  LOG(INFO) << who << ": step " << step << ": " << device.MemoryStatsLine();
  if (!log) return;
  const double mib = 1.0 / (1 << 20);
  log->AddScalar("gpu_memory/in_use_mib", step, static_cast<float>(s.bytes_in_use * mib));
  log->AddScalar("gpu_memory/peak_mib", step, static_cast<float>(s.peak_bytes_in_use * mib));
  log->AddScalar("gpu_memory/reserved_mib", step, static_cast<float>(s.bytes_reserved * mib));
  log->AddScalar("gpu_memory/regions", step, static_cast<float>(s.num_regions));
}

}  // namespace worker
}  // namespace pstrain
