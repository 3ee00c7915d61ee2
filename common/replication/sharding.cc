#include "common/replication/sharding.h"

#include <algorithm>

namespace pstrain {
namespace replication {

Result<Sharding> Sharding::Compute(const std::vector<VariableSpec>& variables, int num_ps,
                                   int64_t partition_bytes) {
  if (num_ps < 1) return InvalidArgument("sharding needs at least one parameter server");
  if (partition_bytes < 0) return InvalidArgument("--partition_bytes must be >= 0");
  Sharding p;
  p.num_ps_ = num_ps;
  std::vector<int64_t> load(num_ps, 0);
  auto place = [&](Partition part) {
    const int64_t bytes = part.shape.num_elements() * static_cast<int64_t>(sizeof(float));
    part.task = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[part.task] += bytes;
    p.partitions_.push_back(std::move(part));
  };
  for (const VariableSpec& v : variables) {
    const int64_t bytes = v.shape.num_elements() * static_cast<int64_t>(sizeof(float));
    const int64_t rows = v.shape.rank() > 0 ? v.shape.dim(0) : 1;
    int64_t parts = 1;
    if (partition_bytes > 0 && bytes > partition_bytes && rows > 1) {
      parts = std::min(rows, (bytes + partition_bytes - 1) / partition_bytes);
    }
    if (parts == 1) {
      place({v.name, v.name, 0, 0, rows, v.shape});
      continue;
    }
    // Rows split as evenly as possible, the first `rows % parts` partitions one row larger.
    int64_t begin = 0;
    for (int64_t i = 0; i < parts; ++i) {
      const int64_t n = rows / parts + (i < rows % parts ? 1 : 0);
      Partition part{
          v.name + "/part_" + std::to_string(i), v.name, 0, begin, begin + n, v.shape.WithBatch(n)};
      place(std::move(part));
      begin += n;
    }
  }
  return p;
}

std::vector<Partition> Sharding::OnTask(int task) const {
  std::vector<Partition> out;
  for (const Partition& part : partitions_) {
    if (part.task == task) out.push_back(part);
  }
  return out;
}

std::vector<int64_t> Sharding::Loads() const {
  std::vector<int64_t> load(num_ps_, 0);
  for (const Partition& part : partitions_) {
    load[part.task] += part.shape.num_elements() * static_cast<int64_t>(sizeof(float));
  }
  return load;
}

}  // namespace replication
}  // namespace pstrain
