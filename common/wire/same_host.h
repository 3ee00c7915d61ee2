// Same-host traffic without CURVE's cost. CURVE encrypts every frame: on one machine's loopback
// libsodium was half of a parameter server's CPU and 15 % of each worker's (docs/performance.md),
// protecting bytes that never leave the machine. Between two processes of one user on one host,
// the file system already says who may connect: so a role whose parameter server is on a loopback
// address talks to it over a Unix socket (ZeroMQ ipc://) in that server's key directory, which is
// mode 0700 and this user's own, so no other user can listen or connect there. As NCCL and MPI
// pick shared memory over the network for peers on one host, but without giving up
// authentication: the client's ZMTP PLAIN user name is its key's name ("worker-1") and its
// password a proof made from its CURVE secret key and the server's public key
// (same_host_proof.h), which the server's ZAP handler (zap_handler.h) checks with its own secret
// key and the public key registered under that name. No secret key crosses the socket: what a
// process bound in the server's place would collect proves that client to that server only,
// which the server's own key could do anyway. The server is known by where it listens: a socket
// in a mode-0700 directory of this user, where only this user's processes, which can read every
// key of the host, can bind. Roles and permissions
// (ps/permissions.h) then see the same identity as over CURVE. Traffic from other hosts, and
// without keys, stays as it was (TCP).
#pragma once

#include <string>

#include "common/status.h"
#include "common/wire/curve.h"

namespace pstrain {
namespace wire {

// The ipc:// endpoint ps task `ps_task` listens on beside its keys:
// ipc://<keys root>/ps-<task>/ps.sock, where <keys root> holds every role's key directory. ""
// (stay on TCP) without keys, with same_host_ipc off, when that directory is not this user's
// alone (mode 0700), or when the path is longer than a Unix socket address allows.
std::string SameHostEndpoint(const ClusterKeys& keys, int ps_task);

// The ipc:// endpoint of a host hub (intra-node sync) led by worker `leader_task`:
// ipc://<keys root>/worker-<leader>/hub.sock, on the same terms as above. Every rank of a hub is on
// its leader's host, so each reaches it there when the leader's directory is private.
std::string SameHostHubEndpoint(const ClusterKeys& keys, int leader_task);

// Where and how to reach ps task `ps_task`, listed as `host_port` in --ps_hosts.
struct ServerRoute {
  std::string endpoint;  // ipc://... on the same host, tcp://host:port otherwise
  Security security;     // plaintext, or this role's keys (CURVE over TCP, PLAIN over ipc)
  bool same_host() const { return endpoint.rfind("ipc://", 0) == 0; }
};
Result<ServerRoute> RouteToServer(const ClusterKeys& keys, int ps_task,
                                  const std::string& host_port);

}  // namespace wire
}  // namespace pstrain
