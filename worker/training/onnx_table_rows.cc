#include "worker/training/onnx_table_rows.h"

#include <algorithm>
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

std::string OnnxExportBlocker(const EmbeddingTables& tables, const Model& model,
                              const FeatureSchema& schema) {
  // Under protobuf's 2 GiB message limit with room for the dense variables.
  constexpr int64_t kMaxTableBytes = int64_t{3} << 29;  // 1.5 GiB
  int64_t bytes = 0;
  for (const EmbeddingBinding& b : tables.bindings()) {
    const std::string& input = model.input_names()[b.input];
    auto feature = std::find_if(schema.features.begin(), schema.features.end(),
                                [&](const FeatureSpec& f) { return f.name == input; });
    const int64_t buckets = feature == schema.features.end() ? 0 : feature->hash_buckets;
    if (buckets <= 0) {
      return "feature '" + input + "' (read by layer '" + b.layer->name() +
             "') has no hash_buckets: its ids are unbounded, so table '" + b.table +
             "' has no whole form to export";
    }
    const ps::SparseTable* table = tables.Find(b.table);
    bytes += (1 + buckets) * (table == nullptr ? 0 : table->dimension()) *
             static_cast<int64_t>(sizeof(float));
  }
  if (bytes > kMaxTableBytes) {
    return "the tables over their hash buckets hold " + std::to_string(bytes >> 20) +
           " MiB, over the " + std::to_string(kMaxTableBytes >> 20) +
           " MiB one ONNX file can carry beside the model";
  }
  return "";
}

}  // namespace worker
}  // namespace pstrain
