// How one step's push is cut so that it overlaps backward (PsClient's overlapped push):
// backward finishes the variables last layer first, so each server's partitions are taken in
// that order and grouped into parts of about `part_bytes`, as DDP groups gradients into 25 MB
// buckets and Horovod into its fusion buffer. A part leaves as soon as every variable in it is
// ready. Parts rather than one message per tensor because ZeroMQ sends a multipart message only
// once its last frame is queued, and every message costs a round of headers and a server apply
// (~31 us a message, ~3.5 us a tensor: docs/scaling.md), so a tiny bias alone is not worth one.
//
// Why not one part per layer: a 1 Gbit/s link carries 4 MB in 32 ms, about what one of ResNet-50's
// conv blocks takes in backward on a GPU; smaller parts add per-message costs without starting
// the transfer earlier in any way that shows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/replication/sharding.h"
#include "worker/distributed/pull_schedule.h"

namespace pstrain {
namespace worker {

// The default size of a part, --push_part_mb.
constexpr int64_t kDefaultPushPartBytes = int64_t{4} << 20;
// The default size above which a variable is split across servers, --partition_bytes.
constexpr int64_t kDefaultPartitionBytes = int64_t{8} << 20;
// Both sizes' default with --replicas. A push is acknowledged once its record is on the backups,
// and a server replicates each part as soon as it has applied it: small parts let one part's
// record cross to the backup while the next part is still arriving. RefNet at 1 Gbit/s
// (tests/multihost/replication_bench.py, 2026-11-26): throughput with --replicas=1 over
// --replicas=0 went from 0.82 (8 MiB partitions, 4 MiB parts) to 0.92 (1 MiB both), and the
// unreplicated run was as fast either way (658 and 656 examples/s).
constexpr int64_t kReplicatedPushBytes = int64_t{1} << 20;
// From this many server tasks up, both sizes default to kReplicatedPushBytes too. Each task then
// holds a few MB of a model like ResNet-50, one or two 4 MiB parts, and whatever of it an 8 MiB
// partition leaves unbalanced; simulated for 8 hosts of 8 GPUs at 100 Gbit/s (bench/run.sh scale
// --simulate, docs/scaling.md), 1 MiB sizes were within 3 points of the larger ones below 6
// tasks (where the servers' CPU bounds) and 4-18 points better from 6 up: 91% of 64 GPUs against
// 84% from 15 tasks up.
constexpr int kManyServers = 6;

// A worker's ZeroMQ I/O threads by default (--io_threads): 2, or 4 from kManyServers server tasks
// up. Each connection to a server is carried by one I/O thread, and a host's leader moves the
// whole host's push and pull: simulated, 8 hosts of 8 GPUs with 15 or more server processes
// reached 87% of 64 GPUs with the leader's client on 3 cores (2 I/O threads and its own) and
// 95-96% on 5 (bench/run.sh scale --simulate --leader_threads, docs/scaling.md).
int ClientIoThreads(int num_ps);

struct PushSizes {
  int64_t partition_bytes = kDefaultPartitionBytes;
  int64_t part_bytes = kDefaultPushPartBytes;
};

// The sizes a role uses: each one given (a flag set on the command line), else its default,
// kReplicatedPushBytes where `replicas` > 0 or there are `num_ps` >= kManyServers server tasks.
// Every role of a cluster gets the same flags, so all split the variables alike.
PushSizes ChoosePushSizes(int replicas, int num_ps, std::optional<int64_t> partition_bytes,
                          std::optional<int64_t> part_bytes);

struct PushPart {
  std::vector<replication::Partition> partitions;  // in the order backward finishes them
  int64_t bytes = 0;
};

// Per server, its partitions in the order backward finishes their variables (the reverse of
// `variable_order`, the model's layer order), cut into parts of at least `part_bytes` each (the
// last part of a server may be smaller). A variable's partitions on one server stay in one part
// unless the part is already full. With `layer_of` (each variable's layer), a part also ends
// where a layer does once it holds `layer_floor_bytes` (0: at every layer), so that a layer's
// gradients wait for no more than that of the layers below it.
std::vector<std::vector<PushPart>> PlanPushParts(const replication::Sharding& sharding,
                                                 const std::vector<std::string>& variable_order,
                                                 int64_t part_bytes,
                                                 const std::map<std::string, int>& layer_of = {},
                                                 int64_t layer_floor_bytes = 0);

// With the whole-step pull, a part ends at a layer once it holds this share of `part_bytes`.
// Cut by size alone, a server's last part held whatever of its share the input side's layers
// left, and all of it waited for them: the sharding deals variables in model order, so every
// server holds some of the first layers, which backward finishes last. Simulated for 8 hosts of
// 8 GPUs (bench/run.sh scale --simulate, docs/scaling.md; 8 MiB partitions, 4 MiB parts, 15-80
// server processes): 79-80% of 64 GPUs cut by size, 84% with this floor, as with a part ending
// at every layer, which sends a message for each small layer.
constexpr int64_t kStepLayerFloorDivisor = 4;

// The parts a worker pushes with pull schedule `schedule` (`layers` in the model's order), as
// PsClient cuts them and the simulator (bench/scale_sim) replays them: with per-layer pulls a
// part never holds two layers, since each layer's update should land as soon as backward has
// it; with the whole-step pull a part ends at a layer once it holds part_bytes /
// kStepLayerFloorDivisor, so that little waits for the layers below it and tiny layers still
// share a message.
std::vector<std::vector<PushPart>> PlanStepParts(const replication::Sharding& sharding,
                                                 const std::vector<LayerVariables>& layers,
                                                 int64_t part_bytes, PullSchedule schedule);

}  // namespace worker
}  // namespace pstrain
