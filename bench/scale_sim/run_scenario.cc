// RunScenario: one simulation in a child process (SimGrid's engine is one per process), its
// outcome back through a pipe.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/scale_sim/simulation.h"

namespace scale_sim {

std::string PushModeName(PushMode mode) {
  switch (mode) {
    case PushMode::kAfterBackward:
      return "push after backward";
    case PushMode::kOverlapped:
      return "overlapped";
    case PushMode::kPerLayerPulls:
      return "overlapped, per-layer pulls";
  }
  return "?";
}

namespace {

Outcome Simulate(const Scenario& s) {
  char name[] = "pstrain-scale-sim";
  char quiet[] = "--log=root.thres:critical";
  // Without the ACKs of each flow charged to the reverse direction's links (SimGrid's cross
  // traffic, 5% of the flow's rate as a constraint on the other way), a push and the replies
  // going out of the same server link do not hold each other back. With it, identical hosts
  // fall into lock step within a few steps and push, then pull, all at once (8 hosts of 8 GPUs,
  // 2 server hosts of 32 cores, 100 Gbit/s: 104 ms a step instead of 60): real ACKs are ~2% of
  // the bytes and queue behind the data rather than take a share of the rate.
  char no_ack_share[] = "--cfg=network/crosstraffic:0";
  // SCALE_SIM_CFG: one more SimGrid option, e.g. --cfg=network/crosstraffic:1 to see it.
  std::string extra = std::getenv("SCALE_SIM_CFG") ? std::getenv("SCALE_SIM_CFG") : "";
  char* argv[] = {name, quiet, no_ack_share, extra.empty() ? nullptr : extra.data(), nullptr};
  int argc = extra.empty() ? 3 : 4;
  sg4::Engine engine(&argc, argv);
  Simulation& sim = Simulation::Get();
  sim.scenario = s;
  const bool whole = s.mode == PushMode::kAfterBackward;
  sim.plan =
      PlanStep(ResNet50Variables(), s.server_processes, s.partition_bytes, whole ? 0 : s.part_bytes,
               s.mode == PushMode::kPerLayerPulls, s.layer_floor_bytes);
  BuildPlatform(sim);
  for (int p = 0; p < s.server_processes; ++p) {
    sg4::Actor::create("ps" + std::to_string(p), sim.server_host_of[p], ServerProcess, p)
        ->daemonize();
  }
  for (int h = 0; h < s.worker_hosts; ++h) {
    sg4::Actor::create("host" + std::to_string(h), sim.worker_hosts[h], WorkerHost, h);
  }
  engine.run();

  Outcome o;
  double end = 0;
  for (int h = 0; h < s.worker_hosts; ++h) {
    const std::vector<double>& ends = sim.step_ends[h];
    if (static_cast<int>(ends.size()) != s.steps) return o;
    const double window = ends.back() - ends[s.warmup_steps - 1];
    const int counted = s.steps - s.warmup_steps;
    o.step_s += window / counted / s.worker_hosts;
    o.images_per_s += counted / window * s.gpus * kBatch;
    end = std::max(end, ends.back());
  }
  const double link_bytes = s.link_bits_per_s / 8 * end;
  for (const Usage& u : sim.server_usage) {
    o.server_link = std::max(o.server_link, std::max(u.bytes_in, u.bytes_out) / link_bytes);
    o.server_cpu += u.cpu_s;
  }
  for (const Usage& u : sim.worker_usage) {
    o.worker_link = std::max(o.worker_link, std::max(u.bytes_in, u.bytes_out) / link_bytes);
    o.worker_cpu = std::max(o.worker_cpu, u.cpu_s / (s.worker_cores * end));
  }
  if (s.shared_cores > 0) {
    for (const Usage& u : sim.worker_usage) o.server_cpu += u.cpu_s;
    o.server_cpu /= s.shared_cores * end;
    o.worker_cpu = 0;
  } else {
    o.server_cpu /= static_cast<double>(s.server_hosts) * s.server_cores * end;
  }
  o.requests_per_step = sim.requests_per_step;
  o.ok = true;
  return o;
}

}  // namespace

Outcome RunScenario(const Scenario& s) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(stdout);  // or the child's copy of what is buffered is printed twice
  const pid_t child = fork();
  if (child < 0) return {};
  if (child == 0) {
    close(fds[0]);
    const Outcome o = Simulate(s);
    ssize_t written = write(fds[1], &o, sizeof(o));
    _exit(written == sizeof(o) ? 0 : 1);
  }
  close(fds[1]);
  Outcome o;
  const ssize_t got = read(fds[0], &o, sizeof(o));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got != sizeof(o) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return o;
}

std::string BoundOf(const Scenario& s, const Outcome& o) {
  const std::pair<const char*, double> used[] = {
      {s.shared_cores > 0 ? "shared cores" : "server CPU", o.server_cpu},
      {"server links", o.server_link},
      {"worker link", o.worker_link},
      {"leader's CPU", o.worker_cpu}};
  const auto most =
      std::max_element(std::begin(used), std::end(used),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  const std::string busiest = std::string(most->first) + " " +
                              std::to_string(static_cast<int>(most->second * 100 + 0.5)) + "%";
  // A link carries at most ~92% of its rate here: TCP's 0.97, and the ACKs of the other
  // direction's traffic.
  if (most->second >= 0.8) return busiest;
  if (o.step_s < 1.05 * s.step_s) return "compute";
  return "step (busiest: " + busiest + ")";
}

}  // namespace scale_sim
