#include "worker/training/onnx_table_rows.h"

#include <algorithm>
#include <string>

namespace pstrain {
namespace worker {

Tensor DenseTableRows(const ps::SparseTable& table, int64_t n) {
  const int64_t d = table.dimension();
  Tensor rows = Tensor::Uninitialized(Shape{n, d});
  for (int64_t id = 0; id < n; ++id) {
    float* out = rows.data() + id * d;
    const float* held = table.Row(id);
    if (held != nullptr) {
      std::copy(held, held + d, out);
    } else {
      table.FirstTouchRow(id, out);
    }
  }
  return rows;
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
    return DenseTableRows(*table, n);
  };
  return out;
}

}  // namespace worker
}  // namespace pstrain
