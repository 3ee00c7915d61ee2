// Ports for test servers, picked below Linux's ephemeral range (32768-60999) so that no
// outgoing connection of a concurrently running test can hold them, and checked by binding.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

namespace pstrain {
namespace testing {

inline int PickPort() {
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  std::uniform_int_distribution<int> dist(20000, 32000);
  for (;;) {
    const int port = dist(rng);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return port;
  }
}

}  // namespace testing
}  // namespace pstrain
