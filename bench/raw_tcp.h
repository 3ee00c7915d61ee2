// The reference of the transport benchmarks: bytes through a plain blocking loopback TCP socket
// pair, the ceiling any message layer on TCP is measured against.
#pragma once

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/timing.h"

namespace pstrain {
namespace bench {

inline void SendAll(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t sent = send(fd, data, bytes, 0);
    CHECK_GT(sent, 0) << "send: " << strerror(errno);
    data += sent;
    bytes -= static_cast<size_t>(sent);
  }
}

inline void RecvAll(int fd, char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t got = recv(fd, data, bytes, 0);
    CHECK_GT(got, 0) << "recv: " << strerror(errno);
    data += got;
    bytes -= static_cast<size_t>(got);
  }
}

// A TCP socket bound to a free loopback port, whose address `addr` receives.
inline int BindLoopback(sockaddr_in* addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof(*addr)), 0);
  socklen_t len = sizeof(*addr);
  CHECK_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len), 0);
  return fd;
}

// GB/s through a plain blocking loopback socket pair: the client sends `bytes`, the server
// receives them and sends `bytes` back, `iters` times.
inline double RawTcpPushPull(size_t bytes, int iters) {
  sockaddr_in addr{};
  const int listener = BindLoopback(&addr);
  CHECK_EQ(listen(listener, 1), 0);
  std::thread server([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buffer(bytes);
    for (int i = -1; i < iters; ++i) {
      RecvAll(fd, buffer.data(), bytes);
      SendAll(fd, buffer.data(), bytes);
    }
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<char> out(bytes, 1), in(bytes);
  Clock::time_point start;
  for (int i = -1; i < iters; ++i) {
    if (i == 0) start = Clock::now();
    SendAll(fd, out.data(), bytes);
    RecvAll(fd, in.data(), bytes);
  }
  const double gbps = 2.0 * bytes * iters / SecondsSince(start) / 1e9;
  server.join();
  close(fd);
  close(listener);
  return gbps;
}

}  // namespace bench
}  // namespace pstrain
