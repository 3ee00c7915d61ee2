// What `pstrain-checkpoint print PATH NAME` shows of one variable, the way TensorFlow users
// inspect a variable while debugging (tf.train.load_variable, then its statistics): its shape,
// min, max, mean, standard deviation, NaN and Inf counts, and its first and last values.
// PATH is a checkpoint file, a directory with a `checkpoint` index (its latest checkpoint), or a
// cluster's train_dir, whose ps-<k>-of-<n> shards are read at the step a restart would restore
// (the newest committed step every shard holds; common/checkpoint/cluster_checkpoint.h) and a
// variable split across servers ("<name>/part_<i>") is joined back along its rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {

struct VariableSummary {
  std::string name;
  std::vector<std::string> files;  // where it was read from (one per part)
  int64_t global_step = 0;
  Tensor value;
  double min = 0, max = 0, mean = 0, stddev = 0;  // over the finite elements
  int64_t nan_count = 0, inf_count = 0, zero_count = 0;
};

// Reads `name` from `path`. NotFound listing the names that are there when it is not;
// DataLoss naming the file when a checkpoint is damaged.
Result<VariableSummary> SummarizeVariable(const std::string& path, const std::string& name);

// The summary as the tool prints it, with at most `max_values` values (first and last halves).
std::string FormatVariableSummary(const VariableSummary& s, int max_values = 20);

}  // namespace pstrain
