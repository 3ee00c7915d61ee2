// A server process: one loop that takes each message in turn once its bytes are in (their CPU
// spent by the I/O threads as they arrived), pays the message's fixed costs (a message and a
// tensor per partition: the transport bench's), and hands the reply to the I/O threads, which
// send it while the loop goes on. The per-byte CPU of both directions is the measured
// 0.77 CPU-s per GB moved; a host's processes share its cores.
#include "bench/scale_sim/simulation.h"

namespace scale_sim {

void ServerProcess(int server) {
  Simulation& sim = Simulation::Get();
  const Scenario& s = sim.scenario;
  sg4::Host* me = sim.server_host_of[server];
  Inbox* in = sim.server_inbox[server].get();
  while (true) {
    Message* m = in->Take();
    // A push answered with the values stands for pstrain's push and the pull after it: two
    // requests of the same partitions.
    const int requests = m->kind == Message::kPush && m->reply_bytes > 0 ? 2 : 1;
    Compute(me, requests * (s.k.message_s + m->tensors * s.k.tensor_s));
    auto* reply = new Message{Message::kReply, m->host, server, m->layer, m->tensors, 0};
    const int64_t bytes = m->reply_bytes;
    delete m;
    sg4::Host* to = sim.worker_hosts[reply->host];
    Inbox* inbox = sim.host_inbox[reply->host].get();
    sg4::Actor::create("reply", me, [&s, me, to, inbox, reply, bytes] {
      Send(me, to, inbox, reply, bytes + s.k.header_bytes, s.k.server_s_per_byte * bytes,
           s.k.worker_s_per_byte * bytes);
    });
  }
}

}  // namespace scale_sim
