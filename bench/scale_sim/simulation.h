// The state one simulation's actors share: the platform's hosts, the step's plan and what the
// resources did. Made by RunScenario in the child process; the actors (server_process.cc,
// worker_host.cc) read it and add to its counters.
#pragma once

#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "bench/scale_sim/scenario.h"
#include "bench/scale_sim/step_plan.h"

namespace scale_sim {

namespace sg4 = simgrid::s4u;

// What travels: a push (with or without its pull), a pull request, or a reply. Its CPU cost on
// the receiving host was started when it was sent (a byte's CPU is spent while it moves:
// ZeroMQ's I/O threads read as the link delivers), and the receiver waits for it.
struct Message {
  enum Kind { kPush, kPull, kReply, kStop } kind = kPush;
  int host = 0;             // the worker host
  int server = 0;           // the server process
  int layer = -1;           // a per-layer pull's layer, echoed in its reply
  int tensors = 0;          // partitions it names
  int64_t reply_bytes = 0;  // what the server sends back (0: an acknowledgement)
  sg4::ExecPtr receive_cpu;
};

struct Usage {
  double cpu_s = 0;  // CPU seconds charged
  double bytes_in = 0, bytes_out = 0;
};

struct Simulation {
  Scenario scenario;
  StepPlan plan;
  std::vector<sg4::Host*> worker_hosts, server_hosts;
  std::vector<sg4::Host*> server_host_of;         // per server process
  sg4::Host* shared_machine = nullptr;            // Scenario::shared_cores > 0
  std::vector<Usage> worker_usage, server_usage;  // per host
  std::vector<std::vector<double>> step_ends;     // per worker host
  int requests_per_step = 0;                      // a worker host's pushes and pulls

  // Where `host`'s CPU work runs: its own cores, or the one shared machine's.
  sg4::Host* CpuOf(sg4::Host* host) const { return shared_machine ? shared_machine : host; }
  // The counters of a worker or server host.
  Usage& UsageOf(sg4::Host* host);
  static Simulation& Get();
};

// Builds the platform: one host per worker host and server host, each with one full-duplex link
// of the scenario's rate to a non-blocking switch.
void BuildPlatform(Simulation& sim);
// Sends `m` of `bytes` from `from` to `to`'s mailbox: the sender's CPU (`send_cpu_s` on
// `from`'s cores) and the receiver's (`receive_cpu_s` on `to_host`'s) run while the bytes move;
// returns once the bytes are delivered and both CPUs are spent.
void Send(sg4::Host* from, sg4::Host* to_host, sg4::Mailbox* to, Message* m, double bytes,
          double send_cpu_s, double receive_cpu_s);

// Spends `seconds` of one core of `host`'s CPU (its own or the shared machine's), and counts it.
void Compute(sg4::Host* host, double seconds);

void ServerProcess(int server);
void WorkerHost(int host);

}  // namespace scale_sim
