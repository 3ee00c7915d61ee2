// The measured cells the simulator can reproduce, copied from docs/scaling.md: the overlapped
// push's bench at 1 Gbit/s (tests/multihost/overlap_bench.py) and run 1 of bench/run.sh scale
// (bench/scale_bench.py, 18:39-18:51 UTC).
#pragma once

namespace scale_sim {

// One worker alone on its host, one server, links shaped to 1 Gbit/s; ms a step.
struct OverlapCell {
  double compute_ms, without_ms, with_ms;
};
constexpr OverlapCell kOverlapCells[] = {
    {35, 1796, 985}, {800, 2557, 1241}, {800, 2576, 1249}, {2000, 3771, 2075}};

// Namespace hosts on 2 shared cores, 35 ms synthetic compute, one push after backward; the link
// as one TCP stream carried it through the shaper (7.26 Gbit/s at tbf 10gbit, 7.96 at 25gbit),
// and the cores all our roles got together ("cores ours").
struct ScaleCell {
  int rate_gbit;
  double carried_gbit;
  int servers, workers;
  double images_per_s, cores_ours;
};
constexpr ScaleCell kScaleCells[] = {
    {10, 7.26, 1, 1, 121.6, 0.39}, {10, 7.26, 1, 2, 191.4, 0.69}, {10, 7.26, 1, 4, 127.6, 0.43},
    {10, 7.26, 1, 8, 121.5, 0.55}, {10, 7.26, 2, 1, 114.8, 0.43}, {10, 7.26, 2, 2, 119.4, 0.42},
    {10, 7.26, 2, 4, 165.8, 0.58}, {10, 7.26, 2, 8, 165.5, 0.62}, {10, 7.26, 4, 1, 133.8, 0.49},
    {10, 7.26, 4, 2, 211.1, 0.78}, {10, 7.26, 4, 4, 146.8, 0.55}, {10, 7.26, 4, 8, 159.3, 0.61},
    {25, 7.96, 1, 1, 127.4, 0.38}, {25, 7.96, 1, 2, 134.4, 0.45}, {25, 7.96, 1, 4, 171.4, 0.59},
    {25, 7.96, 1, 8, 153.5, 0.49}, {25, 7.96, 2, 1, 127.9, 0.45}, {25, 7.96, 2, 2, 127.8, 0.45},
    {25, 7.96, 2, 4, 171.3, 0.57}, {25, 7.96, 2, 8, 281.2, 1.09}, {25, 7.96, 4, 1, 287.8, 0.99},
    {25, 7.96, 4, 2, 332.0, 1.24}, {25, 7.96, 4, 4, 318.8, 1.18}, {25, 7.96, 4, 8, 350.7, 1.26}};

}  // namespace scale_sim
