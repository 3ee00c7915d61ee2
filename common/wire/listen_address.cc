#include "common/wire/listen_address.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

namespace pstrain {
namespace wire {

bool IsLoopbackHost(const std::string& host) {
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (name.empty() || getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback = found != nullptr;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback = loopback && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      loopback = loopback && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    } else {
      loopback = false;
    }
  }
  freeaddrinfo(found);
  return loopback;
}

Result<std::string> ListenEndpoint(const std::string& host_port, bool curve, bool insecure,
                                   const std::string& who) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return InvalidArgument(who + ": '" + host_port + "' is not host:port");
  }
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  if (curve) return "tcp://*:" + port;  // authenticated: reachable on every interface
  if (IsLoopbackHost(host)) {
    const bool v6 = host.find(':') != std::string::npos;
    return v6 ? "tcp://[::1]:" + port : "tcp://127.0.0.1:" + port;
  }
  if (!insecure) {
    return FailedPrecondition(
        who + ": '" + host_port + "' is not a loopback address, and without --curve_keys " +
        "anyone who reaches it could pull, push and shut the cluster down. Give the cluster " +
        "CURVE keys (pstrain-keygen; the launcher does it by default), use 127.0.0.1 on one " +
        "machine, or pass --insecure to serve plaintext on every interface anyway");
  }
  LOG(WARNING) << who << ": --insecure: plaintext on every interface at port " << port
               << ": any process that reaches it is believed about who it is";
  return "tcp://*:" + port;
}

}  // namespace wire
}  // namespace pstrain
