// The platform of a simulation, and how a message crosses it.
#include <stdexcept>
#include <string>

#include "bench/scale_sim/simulation.h"

namespace scale_sim {

namespace {
// Simulated flops a CPU-second: hosts run at this speed a core, so that an amount is seconds
// times it (SimGrid's precision is relative to amounts of this order).
constexpr double kFlops = 1e9;

sg4::Host* AddHost(sg4::NetZone* zone, const std::string& name, int cores, double link_bps,
                   double latency_s) {
  sg4::Host* host = zone->create_host(name, kFlops)->set_core_count(cores);
  sg4::SplitDuplexLink* nic = zone->create_split_duplex_link(name + "_nic", link_bps / 8);
  nic->set_latency(latency_s);
  zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                  {sg4::LinkInRoute(nic, sg4::LinkInRoute::Direction::UP)}, true);
  return host;
}
}  // namespace

void BuildPlatform(Simulation& sim) {
  const Scenario& s = sim.scenario;
  sg4::NetZone* zone = sg4::create_star_zone("cluster");
  for (int h = 0; h < s.worker_hosts; ++h) {
    sim.worker_hosts.push_back(AddHost(zone, "worker" + std::to_string(h), s.worker_cores,
                                       s.link_bits_per_s, s.k.latency_s));
  }
  for (int h = 0; h < s.server_hosts; ++h) {
    sim.server_hosts.push_back(AddHost(zone, "server" + std::to_string(h), s.server_cores,
                                       s.link_bits_per_s, s.k.latency_s));
  }
  for (int p = 0; p < s.server_processes; ++p) {
    sim.server_host_of.push_back(sim.server_hosts[p % s.server_hosts]);
  }
  if (s.shared_cores > 0) {
    // One core as fast as the share of the machine's cores our roles got.
    sim.shared_machine = zone->create_host("machine", s.shared_cores * kFlops);
  }
  zone->seal();
  sim.worker_usage.assign(sim.worker_hosts.size(), {});
  sim.server_usage.assign(sim.server_hosts.size(), {});
  sim.step_ends.assign(sim.worker_hosts.size(), {});
  for (int p = 0; p < s.server_processes; ++p)
    sim.server_inbox.push_back(std::make_unique<Inbox>());
  for (int h = 0; h < s.worker_hosts; ++h) sim.host_inbox.push_back(std::make_unique<Inbox>());
}

Usage& Simulation::UsageOf(sg4::Host* host) {
  for (size_t h = 0; h < worker_hosts.size(); ++h) {
    if (worker_hosts[h] == host) return worker_usage[h];
  }
  for (size_t h = 0; h < server_hosts.size(); ++h) {
    if (server_hosts[h] == host) return server_usage[h];
  }
  throw std::logic_error("no counters for host " + host->get_name());
}

Simulation& Simulation::Get() {
  static Simulation sim;
  return sim;
}

void Compute(sg4::Host* host, double seconds) {
  Simulation& sim = Simulation::Get();
  sim.UsageOf(host).cpu_s += seconds;
  sg4::this_actor::exec_init(seconds * kFlops)->set_host(sim.CpuOf(host))->wait();
}

void Inbox::Put(Message* m) {
  std::unique_lock<sg4::Mutex> lock(*mutex_);
  queue_.push_back(m);
  ready_->notify_one();
}

Message* Inbox::Take() {
  std::unique_lock<sg4::Mutex> lock(*mutex_);
  while (queue_.empty()) ready_->wait(lock);
  Message* m = queue_.front();
  queue_.pop_front();
  return m;
}

void Send(sg4::Host* from, sg4::Host* to_host, Inbox* to, Message* m, double bytes,
          double send_cpu_s, double receive_cpu_s) {
  Simulation& sim = Simulation::Get();
  Usage& sender = sim.UsageOf(from);
  Usage& receiver = sim.UsageOf(to_host);
  sender.cpu_s += send_cpu_s;
  sender.bytes_out += bytes;
  receiver.cpu_s += receive_cpu_s;
  receiver.bytes_in += bytes;
  sg4::ExecPtr send = sg4::this_actor::exec_init(send_cpu_s * kFlops);
  send->set_host(sim.CpuOf(from))->start();
  sg4::ExecPtr receive = sg4::this_actor::exec_init(receive_cpu_s * kFlops);
  receive->set_host(sim.CpuOf(to_host))->start();
  sg4::Comm::sendto(from, to_host, static_cast<uint64_t>(bytes));
  send->wait();
  receive->wait();
  to->Put(m);
}

}  // namespace scale_sim
