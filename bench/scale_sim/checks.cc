// PrintChecks: the simulator against the cells measured on this machine.
#include <cstdio>

#include "bench/scale_sim/measured_cells.h"
#include "bench/scale_sim/scenario.h"
#include "bench/scale_sim/tables.h"

namespace scale_sim {

void PrintChecks() {
  std::printf(
      "\n== check: the overlapped push's bench (one worker alone on its host, one server, 1 "
      "Gbit/s, 2 cores a host), ms a step\n");
  std::printf("| compute | mode | measured | simulated | simulated / measured |\n");
  std::printf("|---|---|---|---|---|\n");
  for (const OverlapCell& c : kOverlapCells) {
    for (PushMode mode : {PushMode::kAfterBackward, PushMode::kOverlapped}) {
      Scenario s;
      s.step_s = c.compute_ms / 1000;
      s.worker_cores = 2;
      s.mode = mode;
      s.steps = 6;
      s.compute_jitter = 0;  // synthetic compute sleeps exactly
      const Outcome o = RunScenario(s);
      const double measured = mode == PushMode::kOverlapped ? c.with_ms : c.without_ms;
      std::printf("| %.0f ms | %s | %.0f | %.0f | %.2f |\n", c.compute_ms,
                  PushModeName(mode).c_str(), measured, o.step_s * 1000,
                  o.step_s * 1000 / measured);
    }
  }

  std::printf(
      "\n== check: bench/run.sh scale, run 3 (namespace hosts sharing 2 cores: every role's CPU "
      "is the cores our roles got; links as one TCP stream carried them), img/s\n");
  std::printf(
      "| link | ps | w | cores ours | measured | simulated | simulated / measured | "
      "bound |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const ScaleCell& c : kScaleCells) {
    Scenario s;
    s.worker_hosts = c.workers;
    s.server_hosts = c.servers;
    s.server_processes = c.servers;
    s.worker_cores = 2;
    s.link_bits_per_s = c.carried_gbit * 1e9;
    s.shared_cores = c.cores_ours;
    const Outcome o = RunScenario(s);
    std::printf("| %dgbit | %d | %d | %.2f | %.1f | %.1f | %.2f | %s |\n", c.rate_gbit, c.servers,
                c.workers, c.cores_ours, c.images_per_s, o.images_per_s,
                o.images_per_s / c.images_per_s, BoundOf(s, o).c_str());
  }
}

}  // namespace scale_sim
