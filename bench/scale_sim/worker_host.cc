// A worker host's steps, as worker/distributed/training_step.cc runs them on its leader:
//
//   1. forward     a third of the step (per-layer pulls: each layer first waits for its values,
//                  broadcast to the host's GPUs, and runs its share of the third)
//   2. backward    two thirds of the step; the layers are handed out last first, each at the end
//                  of its share of the parameters (as synthetic compute does)
//   4. host average each layer's bytes over NVLink as backward hands them out, one layer after
//                  another (NCCL's one stream); none for a worker alone on its host
//   5. push, pull  per server process, its parts in backward's order on one connection: after
//                  the whole average (one part per server), or each part once its layers are
//                  averaged; each followed by a pull of the same variables (the server answers
//                  the push with the values), or with per-layer pulls an acknowledgement only
//   6. upload      the pulled values to every GPU over NVLink
//
// Every GPU of a host runs the same compute, so the host is simulated as its leader. Stage 3
// (the leader's download of the average over PCIe) is not charged.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench/scale_sim/simulation.h"

namespace scale_sim {

namespace {

// Sends one server's parts in order on one connection, each once it is ready.
void SendParts(int host, std::vector<std::pair<double, const SimPart*>> parts) {
  Simulation& sim = Simulation::Get();
  const Scenario& s = sim.scenario;
  sg4::Host* me = sim.worker_hosts[host];
  for (const auto& [ready, part] : parts) {
    sg4::this_actor::sleep_until(ready);
    if (std::getenv("SCALE_SIM_TRACE")) {
      std::fprintf(stderr, "%.4f host %d part of %lld bytes to ps%d (ready %.4f)\n",
                   sg4::Engine::get_clock(), host, static_cast<long long>(part->bytes),
                   part->server, ready);
    }
    auto* m = new Message{Message::kPush,
                          host,
                          part->server,
                          -1,
                          static_cast<int>(part->partitions.size()),
                          s.mode == PushMode::kPerLayerPulls ? 0 : part->bytes};
    Send(me, sim.server_host_of[part->server], sim.server_inbox[part->server].get(), m,
         part->bytes + s.k.header_bytes, s.k.worker_s_per_byte * part->bytes,
         s.k.server_s_per_byte * part->bytes);
  }
}

// Sends one server's per-layer pull requests, input side first.
void SendLayerPulls(int host, std::vector<const SimPart*> pulls) {
  Simulation& sim = Simulation::Get();
  const Scenario& s = sim.scenario;
  for (const SimPart* pull : pulls) {
    auto* m = new Message{Message::kPull,
                          host,
                          pull->server,
                          pull->first_layer,
                          static_cast<int>(pull->partitions.size()),
                          pull->bytes};
    Send(sim.worker_hosts[host], sim.server_host_of[pull->server],
         sim.server_inbox[pull->server].get(), m, s.k.header_bytes, 0, 0);
  }
}

// Takes one reply; returns its layer.
int TakeReply(Inbox* inbox) {
  Message* r = inbox->Take();
  if (std::getenv("SCALE_SIM_TRACE")) {
    std::fprintf(stderr, "%.4f host %d reply from ps%d\n", sg4::Engine::get_clock(), r->host,
                 r->server);
  }
  const int layer = r->layer;
  delete r;
  return layer;
}

}  // namespace

void WorkerHost(int host) {
  Simulation& sim = Simulation::Get();
  const Scenario& s = sim.scenario;
  const StepPlan& plan = sim.plan;
  sg4::Host* me = sim.worker_hosts[host];
  Inbox* inbox = sim.host_inbox[host].get();
  const int layers = static_cast<int>(plan.layer_bytes.size());
  const double total = static_cast<double>(plan.bytes);
  std::mt19937 random(1234 + host);
  std::uniform_real_distribution<double> jitter(1 - s.compute_jitter, 1 + s.compute_jitter);
  if (s.spread_starts) {
    // A step as the links alone would allow it: compute, then a push and a pull.
    const double estimate = s.step_s + 2 * 8 * plan.bytes / s.link_bits_per_s;
    sg4::this_actor::sleep_for(estimate * host / s.worker_hosts);
  }
  // Ring all-reduce's bus bytes: 2 (G-1)/G of the tensor; a broadcast moves it once.
  const double average_s_per_byte =
      s.gpus > 1 ? 2.0 * (s.gpus - 1) / s.gpus / s.k.nvlink_bytes_per_s : 0;
  const double broadcast_s_per_byte = s.gpus > 1 ? 1 / s.k.nvlink_bytes_per_s : 0;
  const bool per_layer = s.mode == PushMode::kPerLayerPulls;

  for (int step = 0; step < s.steps; ++step) {
    const double compute = s.step_s * (s.compute_jitter > 0 ? jitter(random) : 1);
    const double forward = compute / 3, backward = compute - forward;
    // 1. forward
    if (per_layer) {
      std::vector<std::vector<const SimPart*>> of_server(s.server_processes);
      std::vector<int> missing(layers, 0);
      for (int l = 0; l < layers; ++l) {
        for (const SimPart& pull : plan.layer_pulls[l]) of_server[pull.server].push_back(&pull);
        missing[l] = static_cast<int>(plan.layer_pulls[l].size());
      }
      for (auto& pulls : of_server) {
        if (!pulls.empty()) sg4::Actor::create("pulls", me, SendLayerPulls, host, pulls);
      }
      for (int l = 0; l < layers; ++l) {
        while (missing[l] > 0) --missing[TakeReply(inbox)];
        sg4::this_actor::sleep_for((broadcast_s_per_byte + forward / total) * plan.layer_bytes[l]);
      }
    } else {
      sg4::this_actor::sleep_for(forward);
    }

    // 2. backward and 4. the host average, layer by layer, last first
    const double backward_start = sg4::Engine::get_clock();
    std::vector<double> averaged(layers);
    double done = 0, nvlink_free = backward_start;
    for (int l = layers - 1; l >= 0; --l) {
      done += static_cast<double>(plan.layer_bytes[l]);
      const double ready = backward_start + backward * done / total;
      nvlink_free = std::max(nvlink_free, ready) + average_s_per_byte * plan.layer_bytes[l];
      averaged[l] = nvlink_free;
    }

    // 5. push and pull
    int replies = 0;
    for (const std::vector<SimPart>& parts : plan.parts) {
      std::vector<std::pair<double, const SimPart*>> timed;
      for (const SimPart& part : parts) {
        const double ready =
            s.mode == PushMode::kAfterBackward ? averaged[0] : averaged[part.first_layer];
        timed.emplace_back(ready, &part);
      }
      std::stable_sort(timed.begin(), timed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      replies += static_cast<int>(timed.size());
      if (!timed.empty()) sg4::Actor::create("parts", me, SendParts, host, timed);
    }
    if (step == 0) {
      sim.requests_per_step = per_layer ? replies : 2 * replies;
      if (per_layer) {
        for (const auto& pulls : plan.layer_pulls) {
          sim.requests_per_step += static_cast<int>(pulls.size());
        }
      }
    }
    for (int r = 0; r < replies; ++r) TakeReply(inbox);
    sg4::this_actor::sleep_until(std::max(sg4::Engine::get_clock(), backward_start + backward));

    // 6. upload: the values to every GPU (per-layer pulls did it in the forward)
    if (!per_layer) sg4::this_actor::sleep_for(broadcast_s_per_byte * total);
    sim.step_ends[host].push_back(sg4::Engine::get_clock());
    if (std::getenv("SCALE_SIM_TRACE")) {
      std::fprintf(stderr, "%.4f host %d step %d ends\n", sg4::Engine::get_clock(), host, step);
    }
  }
}

}  // namespace scale_sim
