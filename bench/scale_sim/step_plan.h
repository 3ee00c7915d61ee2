// What one worker's step sends, as pstrain cuts it, by pstrain's own code: the variables sharded
// over the server processes (common/replication/sharding.cc, Sharding::Compute), each server's
// partitions in backward's order cut into parts (worker/distributed/push_parts.cc,
// PlanPushParts), and the per-layer pulls (worker/distributed/pull_schedule.cc, PlanLayerPulls),
// turned into the indices the simulator's hosts and servers use.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/scale_sim/model_variables.h"

namespace scale_sim {

struct SimPartition {
  int variable = 0;  // index into the model's variables
  int server = 0;
  int64_t bytes = 0;
};

// One message's worth of partitions on one server.
struct SimPart {
  int server = 0;
  std::vector<int> partitions;  // indices into StepPlan::partitions
  int64_t bytes = 0;
  int first_layer = 0;  // the lowest layer it holds: backward hands it out last
};

struct StepPlan {
  std::vector<SimPartition> partitions;
  std::vector<std::vector<SimPart>> parts;        // per server, in backward's order
  std::vector<std::vector<SimPart>> layer_pulls;  // per layer with variables, one per server
  std::vector<int64_t> layer_bytes;               // per layer with variables
  int64_t bytes = 0;                              // a whole push (and a whole pull)
};

// `part_bytes` <= 0: one part per server holding all it has (the push after backward). Else the
// parts a worker cuts for its pull schedule (PlanStepParts: `per_layer_pulls`, or the whole-step
// pull), unless `layer_floor_bytes` >= 0: then a part ends at a layer once it holds that many
// (0: at every layer), to see what another cut would do.
StepPlan PlanStep(const std::vector<SimVariable>& variables, int servers, int64_t partition_bytes,
                  int64_t part_bytes, bool per_layer_pulls, int64_t layer_floor_bytes = -1);

}  // namespace scale_sim
