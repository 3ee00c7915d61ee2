// What pstrain-scale-sim prints: the check against measured cells, and the clusters at scale.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bench/scale_sim/scenario.h"

namespace scale_sim {

// Simulated against measured, with the ratio, for every cell of measured_cells.h.
void PrintChecks();
// For `worker_hosts` hosts of 8 GPUs at `gbit` Gbit/s: every server layout (hosts x cores each,
// cores/3 processes a host) in each push mode: img/s, efficiency against N x one GPU, the bound.
struct AtScale {
  int worker_hosts = 8;
  double gbit = 100;
  std::vector<int> server_hosts, cores;
  std::vector<PushMode> modes;
  int steps = 30;
  int leader_threads = 0;          // 0: pstrain's I/O threads for the layout (ClientIoThreads) + 1
  int64_t layer_floor_bytes = -1;  // Scenario's
  // Unset: pstrain's defaults for each layout's server processes (ChoosePushSizes).
  std::optional<int64_t> part_bytes, partition_bytes;
};
void PrintAtScale(const AtScale& a);

}  // namespace scale_sim
