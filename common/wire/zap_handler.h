// The process's ZAP handler (ZeroMQ RFC 27): when a CURVE client connects to a server socket,
// ZeroMQ asks it over inproc://zeromq.zap.01 whether that client's public key may in. It answers
// from the keys each CURVE ServerSocket registered under its own ZAP domain, and logs every
// refusal with the client's address. czmq's zauth actor does the same and more (certificate
// directories, IP allow/deny lists, PLAIN); this is the small part pstrain needs, so that the
// transport depends on libzmq alone. A same-host ipc:// socket (same_host.h) uses PLAIN instead:
// the user name is a key's name and the password a proof made with that key's secret and the
// server's public key (same_host_proof.h), which the handler checks with the server's secret key
// and the registered public key; no secret key crosses the socket. Inside the wire library.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {
namespace wire {

struct ZapDomainState;

// One server socket's allow-list, registered for as long as this object lives.
class ZapDomain {
 public:
  // How clients prove their key: CURVE's handshake, or (same-host ipc:// sockets only) PLAIN
  // with the key's name as user name and its same-host proof (same_host_proof.h) as password.
  enum class Proof { kCurve, kSameHostProof };

  // Registers `client_keys` (Z85 public key -> name for the logs) under a fresh domain name,
  // starting the handler first if needed. Call before the socket binds: ZeroMQ lets every
  // CURVE client in when no handler runs. `server_secret` (Z85): the server's own secret key,
  // which kSameHostProof needs to check a proof.
  static Result<std::unique_ptr<ZapDomain>> Register(
      const std::map<std::string, std::string>& client_keys, Proof proof = Proof::kCurve,
      const std::string& server_secret = "");
  ~ZapDomain();  // later clients of this domain are refused

  // For the socket's ZMQ_ZAP_DOMAIN.
  const std::string& name() const;
  // The server's endpoint, for the logs (known once it is bound).
  void set_endpoint(const std::string& endpoint);
  // Clients refused so far.
  int64_t refused() const;
  // The names of the keys let in from `address` (a peer's IP address as ZeroMQ gives it, no
  // port), sorted: which keys a connection from there may hold, when none of its messages came.
  std::vector<std::string> AdmittedFrom(const std::string& address) const;
  // The address ZeroMQ gives the handler for the connection on descriptor `fd`: the peer's IP
  // address over TCP; over a Unix socket "localhost:<uid>:<gid>:<pid>" of the peer process.
  static std::string AddressOf(int fd);

 private:
  explicit ZapDomain(std::shared_ptr<ZapDomainState> state);
  std::shared_ptr<ZapDomainState> state_;
};

}  // namespace wire
}  // namespace pstrain
