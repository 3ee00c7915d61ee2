// Where each variable lives: TensorFlow's GreedyLoadBalancingStrategy (each variable, in model
// order, goes to the least-loaded server by bytes; ties to the lowest task), with variables
// larger than `partition_bytes` split along dimension 0 into partitions placed the same way.
// Every process computes the same sharding from the model, so no lookup service is needed.
// It lives in common/ because workers route requests by it and servers hold what it gives them;
// a partition's `task` is its shard, whose chain of replicas shard_map.h places.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {
namespace replication {

struct VariableSpec {
  std::string name;
  Shape shape;
};

struct Partition {
  std::string key;        // the name servers know it by: the variable's, or "<name>/part_<i>"
  std::string variable;   // the whole variable's name
  int task = 0;           // parameter server task holding it
  int64_t row_begin = 0;  // rows [row_begin, row_end) of dimension 0
  int64_t row_end = 0;
  Shape shape;  // the partition's own shape
};

class Sharding {
 public:
  static Result<Sharding> Compute(const std::vector<VariableSpec>& variables, int num_ps,
                                  int64_t partition_bytes);
  const std::vector<Partition>& partitions() const { return partitions_; }
  std::vector<Partition> OnTask(int task) const;
  int num_ps() const { return num_ps_; }
  // Bytes held by each task.
  std::vector<int64_t> Loads() const;

 private:
  std::vector<Partition> partitions_;
  int num_ps_ = 0;
};

}  // namespace replication
}  // namespace pstrain
