#include "worker/training/embedding_tables.h"

#include <algorithm>

#include "ps/table_rows_tensors.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<EmbeddingTables>> EmbeddingTables::Create(const ConfigNode& tables_node,
                                                                 Model* model,
                                                                 int64_t max_table_rows) {
  auto tables = std::unique_ptr<EmbeddingTables>(new EmbeddingTables());
  ASSIGN_OR_RETURN(tables->tables_, ps::ReadSparseTables(tables_node, max_table_rows));
  ASSIGN_OR_RETURN(tables->bindings_, BindEmbeddings(tables_node, model, tables->tables_));
  return tables;
}

const ps::SparseTable* EmbeddingTables::Find(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

bool EmbeddingTables::Holds(const Variable* v) const {
  for (const EmbeddingBinding& b : bindings_) {
    if (&RowsOf(b) == v) return true;
  }
  return false;
}

Status EmbeddingTables::Gather(const FeatureBatch& batch, int64_t step, bool training) {
  for (const EmbeddingBinding& b : bindings_) {
    const std::vector<int64_t>& ids = batch.ids[b.input];
    RETURN_IF_ERROR(CheckRowsFit(b, ids.size()));
    ps::SparseTable& table = *tables_.at(b.table);
    Tensor rows;
    if (training) {
      ASSIGN_OR_RETURN(rows, table.Gather(ids, step));
    } else {
      rows = table.Lookup(ids);
    }
    Tensor& value = RowsOf(b).value;
    std::copy(rows.data(), rows.data() + rows.size(), value.data());
    std::fill(value.data() + rows.size(), value.data() + value.size(), 0.0f);
  }
  return Status::OK();
}

Status EmbeddingTables::Apply(const FeatureBatch& batch, int64_t step) {
  for (const EmbeddingBinding& b : bindings_) {
    const std::vector<int64_t>& ids = batch.ids[b.input];
    Tensor& grad = RowsOf(b).grad;
    const Tensor rows = Tensor::Wrap(Shape{static_cast<int64_t>(ids.size()), b.layer->dimension()},
                                     grad.data(), nullptr);
    Status applied = tables_.at(b.table)->Apply(ids, ids.empty() ? Tensor() : rows, step);
    if (!applied.ok()) return applied.WithContext(b.layer->Describe());
  }
  return Status::OK();
}

void EmbeddingTables::Evict(int64_t step) {
  for (auto& [name, table] : tables_) table->Evict(step);
}

std::string EmbeddingTables::Summary() const {
  int64_t rows = 0;
  for (const auto& [name, table] : tables_) rows += table->rows();
  return std::to_string(rows) + " rows in " + std::to_string(tables_.size()) + " tables";
}

namespace {
ps::TableTensorNames NamesOf(const std::string& table) {
  return {"tables/" + table + "/ids", "tables/" + table + "/rows"};
}
}  // namespace

void EmbeddingTables::SaveTo(std::map<std::string, Tensor>* tensors) const {
  for (const auto& [name, table] : tables_) ps::PutTableRows(*table, NamesOf(name), tensors);
}

Status EmbeddingTables::RestoreFrom(const std::map<std::string, Tensor>& tensors, int64_t step) {
  std::map<std::string, ps::SparseTable::Rows> restored;
  for (const auto& [name, table] : tables_) {
    Result<ps::SparseTable::Rows> rows = ps::TableRowsIn(*table, NamesOf(name), tensors);
    if (!rows.ok()) return rows.status().WithContext("restoring table '" + name + "'");
    restored[name] = std::move(rows).value();
  }
  for (auto& [name, rows] : restored) RETURN_IF_ERROR(tables_.at(name)->Import(rows, step));
  return Status::OK();
}

}  // namespace worker
}  // namespace pstrain
