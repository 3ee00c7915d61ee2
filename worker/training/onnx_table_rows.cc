#include "worker/training/onnx_table_rows.h"

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace pstrain {
namespace worker {

Tensor DenseTableRows(const ps::SparseTable& table, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return table.Lookup(ids);  // zeros where the table holds no row, creating none
}

OnnxTableRows OnnxTableRowsOf(const EmbeddingTables& tables, const FeatureSchema& schema) {
  OnnxTableRows out;
  for (const FeatureSpec& feature : schema.features) {
    if (feature.kind == FeatureSpec::Kind::kIds && feature.hash_buckets > 0) {
      out.buckets[feature.name] = feature.hash_buckets;
    }
  }
  out.rows = [&tables](const std::string& name, int64_t n) -> Result<Tensor> {
    const ps::SparseTable* table = tables.Find(name);
    if (table == nullptr) return NotFound("no sparse table '" + name + "' to export");
    Tensor rows = DenseTableRows(*table, n);
    // Never exported over a broken row: the trainer's finite check sees only a batch's rows.
    for (int64_t i = 0; i < rows.size(); ++i) {
      if (!std::isfinite(rows[i])) {
        return DataLoss("sparse table '" + name + "': the row of id " +
                        std::to_string(i / table->dimension()) + " holds " +
                        std::to_string(rows[i]) +
                        "; a model with a non-finite value is not "
                        "exported");
      }
    }
    return rows;
  };
  return out;
}

}  // namespace worker
}  // namespace pstrain
