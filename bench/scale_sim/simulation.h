// The state one simulation's actors share: the platform's hosts, the step's plan and what the
// resources did. Made by RunScenario in the child process; the actors (server_process.cc,
// worker_host.cc) read it and add to its counters.
#pragma once

#include <deque>
#include <memory>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "bench/scale_sim/scenario.h"
#include "bench/scale_sim/step_plan.h"

namespace scale_sim {

namespace sg4 = simgrid::s4u;

// What travels: a push (with or without its pull), a pull request, or a reply.
struct Message {
  enum Kind { kPush, kPull, kReply } kind = kPush;
  int host = 0;             // the worker host
  int server = 0;           // the server process
  int layer = -1;           // a per-layer pull's layer, echoed in its reply
  int tensors = 0;          // partitions it names
  int64_t reply_bytes = 0;  // what the server sends back (0: an acknowledgement)
};

// Where a role takes its messages: in the order they are complete, whoever sent them (ZeroMQ
// hands a message to the role once its last frame is in), not the order they started.
class Inbox {
 public:
  Inbox() : mutex_(sg4::Mutex::create()), ready_(sg4::ConditionVariable::create()) {}
  void Put(Message* m);
  Message* Take();

 private:
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr ready_;
  std::deque<Message*> queue_;
};

struct Usage {
  double cpu_s = 0;  // CPU seconds charged
  double bytes_in = 0, bytes_out = 0;
};

struct Simulation {
  Scenario scenario;
  StepPlan plan;
  std::vector<sg4::Host*> worker_hosts, server_hosts;
  std::vector<sg4::Host*> server_host_of;  // per server process
  std::vector<std::unique_ptr<Inbox>> server_inbox, host_inbox;
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
// Sends `m` of `bytes` from `from` to `to_host`, into `to`: the sender's CPU (`send_cpu_s` on
// `from`'s cores) and the receiver's (`receive_cpu_s` on `to_host`'s) run while the bytes move
// (ZeroMQ's I/O threads read as the link delivers); `m` is in `to` once the bytes are there and
// both CPUs are spent, and Send returns then (a connection carries one message at a time).
void Send(sg4::Host* from, sg4::Host* to_host, Inbox* to, Message* m, double bytes,
          double send_cpu_s, double receive_cpu_s);

// Spends `seconds` of one core of `host`'s CPU (its own or the shared machine's), and counts it.
void Compute(sg4::Host* host, double seconds);

void ServerProcess(int server);
void WorkerHost(int host);

}  // namespace scale_sim
