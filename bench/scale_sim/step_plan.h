// What one worker's step sends, as pstrain cuts it: the variables sharded over the server
// processes (common/replication/sharding.cc: each variable in model order to the least-loaded
// server by bytes, a variable above --partition_bytes split along dimension 0 first), each
// server's partitions in backward's order cut into parts of --push_part_mb
// (worker/distributed/push_parts.cc, PlanPushParts), and the per-layer pulls
// (worker/distributed/pull_schedule.h). Written again here rather than linked, so that the
// simulator builds without pstrain's libraries; scale_sim_test.cc holds it to the same rules.
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

// `part_bytes` <= 0: one part per server holding all it has (the push after backward).
// `end_at_layers`: a part also ends where a layer does (what per-layer pulls need).
StepPlan PlanStep(const std::vector<SimVariable>& variables, int servers, int64_t partition_bytes,
                  int64_t part_bytes, bool end_at_layers);

}  // namespace scale_sim
