// The worker and evaluator roles of the pstrain binary. Worker 0 is the chief: it initialises
// the variables on the servers, writes the training summaries, asks the servers for
// checkpoints and, once every worker is done, shuts the servers down. The evaluator pulls the
// variables every few seconds and writes evaluation summaries.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/wire/curve.h"
#include "common/wire/message.h"
#include "worker/distributed/pull_schedule.h"
#include "worker/network/device_placement.h"

namespace pstrain {
namespace worker {

struct RoleOptions {
  int task_index = 0;
  std::vector<std::string> ps_hosts, worker_hosts;
  int evaluators = 0;  // evaluators taking part in the final barrier
  std::string config_path, train_dir, logdir, data_dir;
  // The chief's warm start (worker/training/warm_start.h): the variables from this checkpoint
  // when the servers start fresh, except those restore_exclude names.
  std::string checkpoint_path, restore_exclude;
  int64_t partition_bytes = 8 << 20;
  int64_t max_steps = 0, epochs = 0;
  int64_t log_every_n_steps = 100;
  double log_every_n_secs = 0;  // also a progress line once this long passed (0: steps only)
  int64_t histogram_every_n_steps = 500;  // chief, local steps
  int64_t save_checkpoints_steps = 0;
  double save_checkpoints_secs = 60;
  double eval_interval_secs = 10;
  int init_timeout_secs = 300;
  wire::ClusterKeys curve;             // --curve_keys: CURVE keys for every server connection
  bool insecure = false;               // --insecure: a plaintext hub may listen beyond loopback
  int unavailable_timeout_secs = 600;  // a server down this long fails the role
  // Where the model computes: --device, --allow_soft_placement, ...
  DeviceOptions device;
  // --intra_node_sync: off, cpu or nccl (worker/distributed/intra_node.h).
  std::string intra_node_sync = "off";
  // --synthetic_step_ms: > 0 replaces forward and backward by a wait of this many ms and
  // constant gradients (worker/distributed/training_step.h); 0: real compute.
  int synthetic_step_ms = 0;
  bool async = true;  // --update_mode=async: the servers apply every push on arrival
  // --overlap_push (auto, true, false), --push_part_mb: the push overlaps backward where it may
  // (worker/distributed/training_step.h); auto: not when every server is on loopback.
  std::string overlap_push = "auto";
  int64_t push_part_bytes = int64_t{4} << 20;
  // --pull_schedule: when the step reads the servers' values (worker/distributed/pull_schedule.h);
  // a per-layer one turns the overlapped push on, on loopback too.
  PullSchedule pull_schedule = kDefaultPullSchedule;
  // --min_workers: > 0 when workers join and leave (ps/membership.h); a worker's task index may
  // then lie beyond --worker_hosts, up to --max_workers.
  int min_workers = 0;
  // --elastic_data: examples come from chunks server 0's data ledger leases out, not from
  // this task's modulo share (docs/replication.md section 6).
  bool elastic_data = false;
  int replicas = 0;  // --replicas: backups per shard (PsClient routes by the shard map)
  // --push_dtype: bfloat16 pushes with error feedback and pulls (worker/distributed/push_dtype.h).
  wire::TensorDType push_dtype = wire::TensorDType::kFloat32;
};

// What --elastic_data's ledger on server 0 leases: the train split's examples per epoch, the
// epochs (--epochs, else the config's), the config's seed; read as a worker reads them.
struct ElasticData {
  int64_t examples = 0;
  int64_t epochs = 0;
  uint64_t seed = 0;
};
Result<ElasticData> ReadElasticData(const RoleOptions& options);

Status RunWorker(const RoleOptions& options);
Status RunEvaluator(const RoleOptions& options);

}  // namespace worker
}  // namespace pstrain
