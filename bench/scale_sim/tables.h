// What pstrain-scale-sim prints: the check against measured cells, and the clusters at scale.
#pragma once

#include <vector>

namespace scale_sim {

// Simulated against measured, with the ratio, for every cell of measured_cells.h.
void PrintChecks();
// For `worker_hosts` hosts of 8 GPUs at `gbit` Gbit/s: every server layout (hosts x cores each,
// cores/3 processes a host) in each push mode: img/s, efficiency against N x one GPU, the bound.
void PrintAtScale(int worker_hosts, double gbit, const std::vector<int>& server_hosts,
                  const std::vector<int>& cores, int steps);

}  // namespace scale_sim
