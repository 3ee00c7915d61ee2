// The measured cells the simulator can reproduce, copied from docs/scaling.md: the overlapped
// push's bench at 1 Gbit/s (tests/multihost/overlap_bench.py) and run 3 of bench/run.sh scale
// (bench/scale_bench.py, 2026-11-28 02:04-02:11 UTC, the machine otherwise idle, the build of
// ac46822: the roles on tcmalloc).
#pragma once

namespace scale_sim {

// One worker alone on its host, one server, links shaped to 1 Gbit/s; ms a step.
struct OverlapCell {
  double compute_ms, without_ms, with_ms;
};
constexpr OverlapCell kOverlapCells[] = {
    {35, 1796, 985}, {800, 2557, 1241}, {800, 2576, 1249}, {2000, 3771, 2075}};

// Namespace hosts on 2 shared cores, 35 ms synthetic compute, one push after backward; the link
// as one TCP stream carried it through the shaper (9.53 Gbit/s at tbf 10gbit, 14.11 at 25gbit),
// and the cores all our roles got together ("cores ours").
struct ScaleCell {
  int rate_gbit;
  double carried_gbit;
  int servers, workers;
  double images_per_s, cores_ours;
};
constexpr ScaleCell kScaleCells[] = {
    {10, 9.53, 1, 1, 345.4, 1.03},  {10, 9.53, 1, 2, 511.8, 1.43},  {10, 9.53, 1, 4, 492.2, 1.36},
    {10, 9.53, 1, 8, 505.3, 1.48},  {10, 9.53, 2, 1, 338.5, 1.01},  {10, 9.53, 2, 2, 530.6, 1.54},
    {10, 9.53, 2, 4, 607.7, 1.73},  {10, 9.53, 2, 8, 632.5, 1.81},  {10, 9.53, 4, 1, 345.5, 1.07},
    {10, 9.53, 4, 2, 562.1, 1.58},  {10, 9.53, 4, 4, 620.2, 1.77},  {10, 9.53, 4, 8, 655.8, 1.83},
    {25, 14.11, 1, 1, 492.6, 1.14}, {25, 14.11, 1, 2, 671.0, 1.53}, {25, 14.11, 1, 4, 741.7, 1.63},
    {25, 14.11, 1, 8, 760.8, 1.73}, {25, 14.11, 2, 1, 556.3, 1.28}, {25, 14.11, 2, 2, 665.2, 1.46},
    {25, 14.11, 2, 4, 760.5, 1.71}, {25, 14.11, 2, 8, 715.5, 1.78}, {25, 14.11, 4, 1, 511.5, 1.30},
    {25, 14.11, 4, 2, 594.3, 1.51}, {25, 14.11, 4, 4, 677.9, 1.75}, {25, 14.11, 4, 8, 664.8, 1.81}};

}  // namespace scale_sim
