// The parameter-server role of the pstrain binary (--job_name=ps).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {

struct PsRoleOptions {
  ServerOptions server;
  std::string config_path;     // its `train:` section gives the optimizer, schedule and clipping
  std::string bind_host_port;  // this task's entry of --ps_hosts
  // --ps_hosts: with --replicas, servers send records to the servers after them in a chain.
  std::vector<std::string> ps_hosts;
  // --curve_keys: only the cluster's workers, evaluators and servers get in; this task's own
  // ps-<t> key pair is also its client key towards the other servers.
  wire::ClusterKeys curve;
  wire::MessageLimits limits;  // --max_message_mb
  bool insecure = false;       // --insecure: plaintext may listen beyond loopback
  std::string logdir;          // --logdir: this server's scalars in <logdir>/ps-<task>
  double summary_secs = 0;     // --ps_summary_secs: their interval (0: none)
  // --max_table_rows: caps each embedding table's rows on this server (0: the config's max_rows).
  int64_t max_table_rows = 0;
  // Every variable of the config's model in bytes (the server cannot build the model): with the
  // config, what the largest message of each peer may be (ps/message_bound.h).
  int64_t variable_bytes = 0;
};

// Finds its shard's checkpoints (the chief picks which step to restore), serves every shard it
// holds (ps/server_task.h) until the chief's shutdown, writing its TensorBoard scalars
// (ps/server_summary.h) on the way.
Status RunParameterServer(const PsRoleOptions& options);

}  // namespace ps
}  // namespace pstrain
