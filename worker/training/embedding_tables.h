// The sparse tables behind a model's embedding layers in one-process training: each embedding
// layer reads an id input of the model and names a table (ps/sparse_table.h). Before a step the
// layer's "rows" variable receives its table's rows of the batch's distinct ids, in the order the
// batch lists them (feature_batch.h), so the layer's slot indices point at them; after backward
// the table applies the first rows of the variable's gradient to those ids. The dense variables
// stay with the dense optimizer (ps::VariableStore); Holds tells them apart.
// The `tables:` section is ps/sparse_tables_config.h's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "ps/sparse_table.h"
#include "ps/sparse_tables_config.h"
#include "worker/network/model.h"
#include "worker/training/embedding_bindings.h"
#include "worker/training/feature_batch.h"
#include "worker/training/table_rows.h"

namespace pstrain {
namespace worker {

class EmbeddingTables : public TableRows {
 public:
  // Errors name the layer or the table: an embedding layer reading something other than a model
  // input, naming no table of the list, or of another dimension (embedding_bindings.h).
  // `max_table_rows` > 0 caps every table's max_rows (--max_table_rows).
  static Result<std::unique_ptr<EmbeddingTables>> Create(const ConfigNode& tables_node,
                                                         Model* model, int64_t max_table_rows = 0);

  bool Holds(const Variable* v) const override;
  Status Gather(const FeatureBatch& batch, int64_t step, bool training) override;
  Status Apply(const FeatureBatch& batch, int64_t step) override;
  // Drops rows idle for their table's evict_after_steps.
  void Evict(int64_t step);
  // The table called `name`, or null (an export reads its rows).
  const ps::SparseTable* Find(const std::string& name) const;
  // "1234 rows in 52 tables", for progress lines.
  std::string Summary() const;
  // Every table's rows and optimizer slots as checkpoint tensors: "tables/<name>/ids", ".../rows"
  // and ".../rows/<slot>" (ps/table_rows_tensors.h).
  void SaveTo(std::map<std::string, Tensor>* tensors) const;
  // Every table's rows from checkpoint `tensors`, touched at `step`; a table the checkpoint lacks
  // starts empty. Fails naming the table and the tensor, changing nothing, on any bad one.
  Status RestoreFrom(const std::map<std::string, Tensor>& tensors, int64_t step);
  // Which table each embedding layer reads, and from which model input.
  const std::vector<EmbeddingBinding>& bindings() const { return bindings_; }

 private:
  ps::SparseTables tables_;
  std::vector<EmbeddingBinding> bindings_;
};

}  // namespace worker
}  // namespace pstrain
