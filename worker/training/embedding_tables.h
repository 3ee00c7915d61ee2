// The sparse tables behind a model's embedding layers in one-process training: each embedding
// layer reads an id input of the model and names a table (ps/sparse_table.h). Before a step the
// layer's "rows" variable receives its table's rows of the batch's distinct ids, in the order the
// batch lists them (feature_batch.h), so the layer's slot indices point at them; after backward
// the table applies the first rows of the variable's gradient to those ids. The dense variables
// stay with the dense optimizer (ps::VariableStore); Holds tells them apart.
//
//   tables:
//     optimizer: {type: adagrad}
//     learning_rate: {initial: 0.05}
//     clipping: {by_norm: 10}      # optional, per step's rows of a table
//     list:
//       - {name: wide_C1, dimension: 1, max_rows: 100000}
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "ps/sparse_table.h"
#include "worker/network/layers/embedding.h"
#include "worker/network/model.h"
#include "worker/training/feature_batch.h"

namespace pstrain {
namespace worker {

class EmbeddingTables {
 public:
  // Errors name the layer or the table: an embedding layer reading something other than a model
  // input, naming no table of the list, or of another dimension.
  // `max_table_rows` > 0 caps every table's max_rows (--max_table_rows).
  static Result<std::unique_ptr<EmbeddingTables>> Create(const ConfigNode& tables_node,
                                                         Model* model, int64_t max_table_rows = 0);

  // Whether `v` is an embedding layer's gathered rows (updated here, not by the dense store).
  bool Holds(const Variable* v) const;
  // Fills every embedding layer's rows for `batch`: training gathers (rows created on first
  // touch), evaluation only looks up. Fails naming the layer when the batch has more distinct
  // ids than the layer's `rows`, or the table refuses (its max_rows).
  Status Gather(const FeatureBatch& batch, int64_t step, bool training);
  // Applies each embedding layer's row gradients to its table, after Model::Backward.
  Status Apply(const FeatureBatch& batch, int64_t step);
  // Drops rows idle for their table's evict_after_steps.
  void Evict(int64_t step);
  // The table called `name`, or null (an export reads its rows).
  const ps::SparseTable* Find(const std::string& name) const;
  // "1234 rows in 52 tables", for progress lines.
  std::string Summary() const;

 private:
  struct Binding {
    Embedding* layer;
    int input;  // the model input holding its slot indices
    ps::SparseTable* table;
  };
  std::map<std::string, std::unique_ptr<ps::SparseTable>> tables_;
  std::vector<Binding> bindings_;
};

}  // namespace worker
}  // namespace pstrain
