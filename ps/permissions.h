// Who sent a request to a parameter server, and whether its role may make it. As etcd,
// ZooKeeper and Kafka's ACLs do, the identity comes from the credential, not from the message:
// with CURVE the sender is the name its authenticated key was registered under ("worker-1", set
// by the ZAP handler on the connection), and the role and task index its header claims must
// agree with that name. In plaintext nothing is authenticated, so the header is believed; that
// is why plaintext servers bind the loopback address only (ps/ps_role.cc).
//
// What each role may ask:
//   evaluator  heartbeat; register without values (are the variables ready?); pull; row pull;
//              barrier
//   worker     the same, and push its gradients and row gradients
//   chief      (worker 0) all of that, and register with the initial values, checkpoint,
//              restore a checkpoint, shutdown, set the shard map
//   ps         (key ps-<t>) replicate and replica copy, to the next server of a chain, and
//              nothing else (docs/replication.md, section 3)
// Workers and the chief may lease data; evaluators and workers may get the shard map. Nobody
// else may do anything.
#pragma once

#include <string>

#include "common/status.h"
#include "common/wire/message.h"

namespace pstrain {
namespace ps {

// A request's sender as the server believes it.
struct Sender {
  std::string role;  // "worker", "chief", "evaluator" or "ps"
  int task = -1;
  bool authenticated = false;  // by its CURVE key; false in plaintext

  // "worker 1", "chief 0": how logs and the server's peer table name it.
  std::string Name() const { return role + " " + std::to_string(task); }
};

// How many tasks of each role the cluster has, so that a sender's task index is one of them (in
// plaintext nothing else bounds it). 0 workers: unknown, not checked.
struct ClusterSize {
  int workers = 0;
  int evaluators = 0;  // --evaluators; one evaluator is always allowed
  int servers = 0;     // --ps_hosts; 0: unknown, not checked
  // The flag that bounds worker task indices, for errors: --max_workers when workers may join
  // and leave (--min_workers > 0).
  const char* workers_flag = "--worker_hosts";
};

// The sender of `request`, which arrived on a connection authenticated as `identity` (the
// ZAP User-Id, e.g. "worker-1"; empty in plaintext). PermissionDenied when the header claims a
// role or task that is not the key's, a task the cluster does not have, or no role at all.
Result<Sender> IdentifySender(const std::string& identity, const wire::Message& request,
                              const ClusterSize& cluster = {});

// OK when `sender` may make `request`; PermissionDenied naming the role and the request if not.
Status Authorize(const Sender& sender, const wire::Message& request);

}  // namespace ps
}  // namespace pstrain
