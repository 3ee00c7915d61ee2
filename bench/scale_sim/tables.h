// What pstrain-scale-sim prints: the check against measured cells, and the clusters at scale.
#pragma once

#include <cstdint>
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
  int leader_threads = 3;
  bool parts_end_at_layers = false;
  int64_t part_bytes = int64_t{4} << 20, partition_bytes = int64_t{8} << 20;
};
void PrintAtScale(const AtScale& a);

}  // namespace scale_sim
