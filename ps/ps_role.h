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
  wire::ClusterKeys curve;     // --curve_keys: only the cluster's workers and evaluators get in
  wire::MessageLimits limits;  // --max_message_mb
  bool insecure = false;       // --insecure: plaintext may listen beyond loopback
  std::string logdir;          // --logdir: this server's scalars in <logdir>/ps-<task>
  double summary_secs = 0;     // --ps_summary_secs: their interval (0: none)
};

// Finds the shard's checkpoints (the chief picks which step to restore), serves until the
// chief's shutdown, writing its TensorBoard scalars (ps/server_summary.h) on the way.
Status RunParameterServer(const PsRoleOptions& options);

}  // namespace ps
}  // namespace pstrain
