// CurveZMQ keys for the transport. With ZeroMQ's CURVE mechanism every process has a Curve25519
// key pair; a server lets in only the client public keys it was given (through the ZAP handler,
// zap_handler.h) and a client talks only to the server whose public key it trusts. Traffic is
// then encrypted and authenticated both ways.
//
// Keys are Z85 text (40 characters) kept in ZeroMQ's certificate files, as czmq's zcert writes
// them, so ZeroMQ's own tools read them:
//   NAME.key         a `curve` section with public-key = "..."                    (mode 0644)
//   NAME.key_secret  the same with secret-key = "..." as well                      (mode 0600)
// A cluster's keys (pstrain-keygen, the launcher) are one directory per role holding that role's
// secret certificate and every role's public one:
//   DIR/<job>-<task>/<job>-<task>.key_secret, DIR/<job>-<task>/{ps,worker,evaluator}-<n>.key
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {
namespace wire {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty when only the public key is known
};

// A fresh key pair (zmq_curve_keypair, which draws from libsodium).
Result<CurveKeyPair> NewCurveKeyPair();

// Writes `path` (public certificate, 0644) and `path`_secret (secret certificate, 0600).
Status WriteCurveCertificates(const std::string& path, const CurveKeyPair& keys);
// Reads a public certificate (a secret one works too; its secret key is ignored).
Result<CurveKeyPair> ReadPublicCertificate(const std::string& path);
// Reads a secret certificate; refuses one that group or others may read, and one whose public
// key does not belong to its secret key.
Result<CurveKeyPair> ReadSecretCertificate(const std::string& path);

// How one socket authenticates. Default-constructed: plaintext (ZeroMQ's NULL mechanism).
struct Security {
  CurveKeyPair own;  // this process's key pair; empty for plaintext
  // This process's name among the cluster's keys ("worker-1"): a client's user name on a
  // same-host ipc:// channel (same_host.h), where it proves its key without CURVE.
  std::string own_name;
  std::string server_key;  // a client: the public key of the server it connects to
  // A server: the client public keys it lets in, each with a name for the logs ("worker-1").
  std::map<std::string, std::string> client_keys;

  bool curve() const { return !own.secret_key.empty(); }
};

// One role's keys from a cluster's key directory; empty `dir` means plaintext.
struct ClusterKeys {
  std::string dir;
  std::string own_name;  // "<job>-<task>", as the other roles' key files name this one
  CurveKeyPair own;
  std::vector<std::string> ps_keys;                // public key of ps task i
  std::map<std::string, std::string> client_keys;  // worker and evaluator public keys -> name
  // Same-host peers talk over ipc:// sockets beside the keys instead of CURVE over TCP
  // (same_host.h); --same_host_ipc=false keeps CURVE for them too.
  bool same_host_ipc = true;

  bool curve() const { return !dir.empty(); }
  // For the parameter server's socket: lets in every worker, evaluator and ps of the cluster
  // (ps-<t>: servers replicate to one another).
  Security ForServer() const;
  // For a connection to ps task `ps_task` (plaintext without keys).
  Result<Security> ForClientOf(int ps_task) const;
};

// Reads `dir`/<job>-<task>.key_secret and every <job>-<n>.key beside it. Errors name the file.
Result<ClusterKeys> LoadClusterKeys(const std::string& dir, const std::string& job, int task_index);

// Writes fresh keys for a cluster into `dir` (which must not exist or be empty): one directory
// per role (mode 0700) with that role's secret certificate and every role's public one.
Status WriteClusterKeys(const std::string& dir, int ps, int workers, int evaluators);

}  // namespace wire
}  // namespace pstrain
