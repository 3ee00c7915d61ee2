// PrintAtScale: ResNet-50 on hosts of 8 GPUs against every server layout, in each push mode.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "bench/scale_sim/model_variables.h"
#include "bench/scale_sim/scenario.h"
#include "bench/scale_sim/step_plan.h"
#include "bench/scale_sim/tables.h"
#include "worker/distributed/push_parts.h"

namespace scale_sim {

namespace {
// How many times the mean share of the model the most loaded server host holds: processes go to
// hosts in turn, each with what the sharding gave it (a variable or partition whole).
double HostLoadOverMean(int processes, int hosts, int64_t partition_bytes) {
  const StepPlan plan = PlanStep(ResNet50Variables(), processes, partition_bytes, 0, false);
  std::vector<double> load(hosts, 0);
  for (const SimPartition& p : plan.partitions) load[p.server % hosts] += p.bytes;
  return *std::max_element(load.begin(), load.end()) / (static_cast<double>(plan.bytes) / hosts);
}
}  // namespace

void PrintAtScale(const AtScale& a) {
  const int gpus = 8, worker_hosts = a.worker_hosts;
  const double gbit = a.gbit;
  const double ideal = worker_hosts * gpus * kBatch / kOneGpuStepSeconds;
  std::printf(
      "\n== %d GPUs: %d hosts x %d GPUs, %.0f Gbit/s links, servers on hosts of their "
      "own; ideal %.0f img/s (%d x %.0f)\n",
      worker_hosts * gpus, worker_hosts, gpus, gbit, ideal, worker_hosts * gpus,
      kBatch / kOneGpuStepSeconds);
  const std::vector<PushMode>& modes = a.modes;
  std::printf("| server hosts | cores each | processes | busiest server host's bytes / mean |");
  for (PushMode m : modes) std::printf(" %s: img/s | eff | bound |", PushModeName(m).c_str());
  std::printf("\n|---|---|---|---|");
  for (size_t i = 0; i < modes.size(); ++i) std::printf("---|---|---|");
  std::printf("\n");
  for (int hosts : a.server_hosts) {
    for (int c : a.cores) {
      Scenario s;
      s.worker_hosts = worker_hosts;
      s.gpus = gpus;
      s.server_hosts = hosts;
      s.server_cores = c;
      // A server process keeps ~3 cores busy (its loop and ZeroMQ's 2 I/O threads).
      s.server_processes = hosts * (c / 3 > 0 ? c / 3 : 1);
      s.link_bits_per_s = gbit * 1e9;
      s.steps = a.steps;
      s.worker_cores = a.leader_threads > 0
                           ? a.leader_threads
                           : pstrain::worker::ClientIoThreads(s.server_processes) + 1;
      s.layer_floor_bytes = a.layer_floor_bytes;
      const pstrain::worker::PushSizes sizes =
          pstrain::worker::ChoosePushSizes(0, s.server_processes, a.partition_bytes, a.part_bytes);
      s.part_bytes = sizes.part_bytes;
      s.partition_bytes = sizes.partition_bytes;
      // Hosts that start apart fall into step with one another within a few steps (below):
      // the first third is not counted.
      s.warmup_steps = a.steps / 3;
      std::printf("| %d | %d | %d | %.2f |", hosts, c, s.server_processes,
                  HostLoadOverMean(s.server_processes, hosts, s.partition_bytes));
      for (PushMode m : modes) {
        s.mode = m;
        const Outcome o = RunScenario(s);
        if (!o.ok) {
          std::printf(" failed | | |");
          continue;
        }
        std::printf(" %.0f | %.1f%% | %s |", o.images_per_s, 100 * o.images_per_s / ideal,
                    BoundOf(s, o).c_str());
        if (std::getenv("SCALE_SIM_VERBOSE")) {
          std::printf(" [step %.1f ms; server link %.2f cpu %.2f; worker link %.2f cpu %.2f]",
                      o.step_s * 1e3, o.server_link, o.server_cpu, o.worker_link, o.worker_cpu);
        }
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace scale_sim
