// The measured costs the simulator charges, each with where it was measured (docs/scaling.md).
// Nothing here is fitted to the cells the simulator is checked against, except as said: the two
// per-byte CPU costs are bench/scale_model.py's fit of run 3's cells, which the check of those
// cells therefore reproduces partly by construction (the link and ordering parts it does not).
#pragma once

namespace scale_sim {

struct Constants {
  // A server's CPU per byte it moves, in or out: 0.43 CPU-s per GB (bench/scale_model.py over
  // run 3's 24 cells of bench/run.sh scale, the roles on tcmalloc; 0.33-0.61 in every cell; run
  // 1's, on glibc's malloc under other users' load, gave 0.77).
  double server_s_per_byte = 0.43e-9;
  // A worker's CPU per byte it pushes or pulls: 0.38 s/GB (the same fit: all roles' CPU less the
  // servers', over the bytes moved; run 1: 0.35).
  double worker_s_per_byte = 0.38e-9;
  // A message, answered: 30.9 us (the transport bench, 32,392 one-tensor pushes a second, on a
  // faster day of this machine; on 2026-11-28 it measured 90 us against a bare ZeroMQ round
  // trip of 73 us: pstrain's own share ~17 us, so 30.9 stays, on the safe side).
  double message_s = 30.9e-6;
  // A tensor more in one push: 3.51 us (the transport bench, 285,021 updates a second in pushes
  // of 1,000 tensors; 2.39 us on tcmalloc, 2026-11-28: 3.51 stays, on the safe side).
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
