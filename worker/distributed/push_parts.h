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

struct PushSizes {
  int64_t partition_bytes = kDefaultPartitionBytes;
  int64_t part_bytes = kDefaultPushPartBytes;
};

// The sizes a role uses: each one given (a flag set on the command line), else its default,
// kReplicatedPushBytes where `replicas` > 0. Every role of a cluster gets the same flags, so all
// split the variables alike.
PushSizes ChoosePushSizes(int replicas, std::optional<int64_t> partition_bytes,
                          std::optional<int64_t> part_bytes);

struct PushPart {
  std::vector<replication::Partition> partitions;  // in the order backward finishes them
  int64_t bytes = 0;
};

// Per server, its partitions in the order backward finishes their variables (the reverse of
// `variable_order`, the model's layer order), cut into parts of at least `part_bytes` each (the
// last part of a server may be smaller). A variable's partitions on one server stay in one part
// unless the part is already full. With `layer_of` (each variable's layer), a part also ends
// where a layer does, so that no layer's gradients wait for a layer below it: what per-layer
// pulls need, whose point is that each layer's update lands as soon as backward has it.
std::vector<std::vector<PushPart>> PlanPushParts(const replication::Sharding& sharding,
                                                 const std::vector<std::string>& variable_order,
                                                 int64_t part_bytes,
                                                 const std::map<std::string, int>& layer_of = {});

}  // namespace worker
}  // namespace pstrain
