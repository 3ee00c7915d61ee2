// The reference for small requests: round trips of a bare ZeroMQ DEALER/ROUTER pair on loopback
// TCP, the same socket types and frame layout pstrain's connections use (a header frame and a
// tensor frame out, a header frame back), with nothing decoded, checked or applied. Both ends share
// one context of two I/O threads, as the bench's pstrain client and server share pstrain's
// (wire::ZmqContext), so that each side's socket has an I/O thread as in two processes and the
// two measurements have the same threads. A push of one small variable can be no faster than
// this; the bench prints pstrain's rate over it.
#pragma once

#include <glog/logging.h>
#include <zmq.h>

#include <string>
#include <thread>
#include <vector>

#include "bench/timing.h"

namespace pstrain {
namespace bench {

// Round trips a second: `iters` requests of a 64-byte header and a `payload`-byte frame, each
// answered by a 64-byte frame from a ROUTER on its own thread.
inline double RawZmqRoundTrips(size_t payload, int iters) {
  void* context = zmq_ctx_new();
  zmq_ctx_set(context, ZMQ_IO_THREADS, 2);
  void* router = zmq_socket(context, ZMQ_ROUTER);
  CHECK_EQ(zmq_bind(router, "tcp://127.0.0.1:*"), 0) << zmq_strerror(zmq_errno());
  char endpoint[256];
  size_t length = sizeof(endpoint);
  CHECK_EQ(zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &length), 0);
  std::thread server([&] {
    std::vector<char> frame(payload + 64), reply(64, 'r');
    for (int i = 0; i < iters + 1; ++i) {  // one warm-up round
      char identity[256];
      const int id = zmq_recv(router, identity, sizeof(identity), 0);
      CHECK_GT(id, 0);
      int more = 1;
      while (more) {
        CHECK_GE(zmq_recv(router, frame.data(), frame.size(), 0), 0);
        size_t size = sizeof(more);
        zmq_getsockopt(router, ZMQ_RCVMORE, &more, &size);
      }
      zmq_send(router, identity, static_cast<size_t>(id), ZMQ_SNDMORE);
      zmq_send(router, reply.data(), reply.size(), 0);
    }
  });
  void* dealer = zmq_socket(context, ZMQ_DEALER);
  CHECK_EQ(zmq_connect(dealer, endpoint), 0) << zmq_strerror(zmq_errno());
  std::vector<char> header(64, 'h'), tensor(payload, 't'), answer(64);
  auto round = [&] {
    zmq_send(dealer, header.data(), header.size(), ZMQ_SNDMORE);
    zmq_send(dealer, tensor.data(), tensor.size(), 0);
    CHECK_GE(zmq_recv(dealer, answer.data(), answer.size(), 0), 0);
  };
  round();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < iters; ++i) round();
  const double rate = iters / SecondsSince(start);
  server.join();
  zmq_close(dealer);
  zmq_close(router);
  zmq_ctx_term(context);
  return rate;
}

}  // namespace bench
}  // namespace pstrain
