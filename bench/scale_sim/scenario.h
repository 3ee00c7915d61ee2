// One simulated cluster and what it did: the options (as gloo takes an options struct) and the
// outcome. RunScenario runs one SimGrid simulation in a child process, since SimGrid's engine
// is one per process and cannot be started twice.
#pragma once

#include <cstdint>
#include <string>

#include "bench/scale_sim/constants.h"

namespace scale_sim {

enum class PushMode {
  kAfterBackward,  // one push per server after the host's average, then one pull per server
  kOverlapped,     // each part as soon as its layers are averaged, each followed by its pull
  kPerLayerPulls,  // overlapped pushes without pulls; the next forward pulls layer by layer
};
std::string PushModeName(PushMode mode);

struct Scenario {
  int worker_hosts = 1;
  int gpus = 1;  // per worker host; 1: a worker alone on its host (no host average)
  int server_hosts = 1;
  int server_cores = 2;      // per server host
  int server_processes = 1;  // in all, spread evenly over the server hosts
  int worker_cores = 3;      // the leader's client: ZeroMQ's 2 I/O threads and its own
  double link_bits_per_s = 1e9;
  double step_s = kOneGpuStepSeconds;  // compute: a third forward, two thirds backward
  PushMode mode = PushMode::kAfterBackward;
  int64_t part_bytes = int64_t{4} << 20;       // --push_part_mb
  int64_t partition_bytes = int64_t{8} << 20;  // --partition_bytes
  // >= 0: a part ends at a layer once it holds this many bytes (0: at every layer), instead of
  // where pstrain's plan for the pull schedule ends it (PlanStepParts): what another cut would do.
  int64_t layer_floor_bytes = -1;
  // Hosts of an async job drift apart (they start seconds apart, and a GPU's step varies by a few
  // percent): host h starts h/N of a step after host 0, and each step's compute is drawn
  // uniformly within +-`compute_jitter` of `step_s`. Without both, identical hosts push in lock
  // step, and the servers' links carry the pushes and then the pulls, never both at once.
  bool spread_starts = true;
  double compute_jitter = 0.03;
  int steps = 10;
  int warmup_steps = 2;  // not counted
  // > 0: every role's CPU is one machine's, this many cores in all (bench/run.sh scale's
  // namespace hosts share 2 cores; the cells say how many of them our roles got).
  double shared_cores = 0;
  Constants k;
};

struct Outcome {
  bool ok = false;
  double step_s = 0;  // a worker host's mean step, after warm-up
  double images_per_s = 0;
  // Busiest fraction of the window, each resource kind: the most loaded server link (in or
  // out), the servers' cores together, the most loaded worker link, the busiest leader's cores.
  double server_link = 0, server_cpu = 0, worker_link = 0, worker_cpu = 0;
  int requests_per_step = 0;  // a worker host's pushes and pulls
};

Outcome RunScenario(const Scenario& s);
// What bounds the outcome: the busiest resource and its use when >= 80% of the run, else the
// step itself (compute, or compute and the exchange after it), naming the busiest resource.
std::string BoundOf(const Scenario& s, const Outcome& o);

}  // namespace scale_sim
