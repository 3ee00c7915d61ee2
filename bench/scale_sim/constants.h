// The measured costs the simulator charges, each with where it was measured (docs/scaling.md).
// Nothing here is fitted to the cells the simulator is checked against, except as said: the two
// per-byte CPU costs are bench/scale_model.py's fit of run 1's cells, which the check of those
// cells therefore reproduces partly by construction (the link and ordering parts it does not).
#pragma once

namespace scale_sim {

struct Constants {
  // A server's CPU per byte it moves, in or out: 0.77 CPU-s per GB (bench/scale_model.py over
  // run 1's 24 cells of bench/run.sh scale; 0.68-0.93 in every cell of two runs).
  double server_s_per_byte = 0.77e-9;
  // A worker's CPU per byte it pushes or pulls: 0.35 s/GB (the same fit: all roles' CPU less the
  // servers', over the bytes moved).
  double worker_s_per_byte = 0.35e-9;
  // A message, answered: 30.9 us (the transport bench, 32,392 one-tensor pushes a second).
  double message_s = 30.9e-6;
  // A tensor more in one push: 3.51 us (the transport bench, 285,021 updates a second in pushes
  // of 1,000 tensors).
  double tensor_s = 3.51e-6;
  // The host average over NVLink, bytes a second of bus bandwidth: scale_model.py's 150 GB/s
  // (2 x 7/8 x M for 8 GPUs, 1.2 ms for ResNet-50). Not measured here: no GPUs.
  double nvlink_bytes_per_s = 150e9;
  // One link's latency each way. Not measured here (this kernel has no netem); a switch hop and
  // two NICs in a data centre.
  double latency_s = 10e-6;
  // Header bytes of a message besides its tensors (ZeroMQ frames and the wire struct).
  double header_bytes = 256;
};

// ResNet-50 at batch 64 on one H100: ~1,800 img/s (issue 13), so 35 ms a step, 1,829 img/s.
constexpr double kOneGpuStepSeconds = 0.035;
constexpr int kBatch = 64;

}  // namespace scale_sim
