// Where a step's embedding rows come from and where their gradients go: the one-process tables
// (embedding_tables.h) or the parameter servers that own the rows
// (worker/distributed/remote_tables.h). A training loop sees only this: before a step each
// embedding layer's "rows" variable gets its table's rows of the batch's distinct ids, in the
// order the batch lists them (feature_batch.h); after backward its first rows of gradient go
// back to those ids.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "worker/network/layer.h"
#include "worker/training/feature_batch.h"

namespace pstrain {
namespace worker {

class TableRows {
 public:
  virtual ~TableRows() = default;
  // Whether `v` is an embedding layer's gathered rows (updated here, not by the dense store).
  virtual bool Holds(const Variable* v) const = 0;
  // Fills every embedding layer's rows for `batch`: training gathers (rows created on first
  // touch), evaluation only looks up. Fails naming the layer when the batch has more distinct
  // ids than the layer's `rows`, or naming the table when it refuses.
  virtual Status Gather(const FeatureBatch& batch, int64_t step, bool training) = 0;
  // Applies each embedding layer's row gradients to its table, after Model::Backward.
  virtual Status Apply(const FeatureBatch& batch, int64_t step) = 0;
};

}  // namespace worker
}  // namespace pstrain
