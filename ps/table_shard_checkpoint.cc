// A table shard in the server's checkpoints: each table's rows as tensors beside the dense
// variables, and back. Kept apart from the rows' pulls and pushes in table_shard.cc.
#include "ps/table_rows_tensors.h"
#include "ps/table_shard.h"

namespace pstrain::ps {
namespace {

// "tables/C1/rows/part_1": this server's part of the table, named as a variable split across
// servers is, so that a cluster's shards join into whole tables (joined_checkpoint.h: the parts'
// rows stacked in server order, ids and slots alike).
TableTensorNames NamesOf(const std::string& table, int server) {
  const std::string part = "/part_" + std::to_string(server);
  return {"tables/" + table + "/ids" + part, "tables/" + table + "/rows" + part};
}

}  // namespace

void TableShard::SaveTo(std::map<std::string, Tensor>* tensors) const {
  for (const auto& [name, table] : tables_) {
    PutTableRows(*table, NamesOf(name, options_.server), tensors);
  }
}

Result<SparseTable::Rows> TableShard::RowsIn(const std::string& name,
                                             const std::map<std::string, Tensor>& tensors) const {
  ASSIGN_OR_RETURN(SparseTable::Rows rows,
                   TableRowsIn(*tables_.at(name), NamesOf(name, options_.server), tensors));
  RETURN_IF_ERROR(CheckOwned(name, rows.ids));
  return rows;
}

Status TableShard::CheckRestore(const std::map<std::string, Tensor>& tensors) const {
  for (const auto& [name, table] : tables_) {
    Result<SparseTable::Rows> rows = RowsIn(name, tensors);
    if (!rows.ok()) return rows.status().WithContext(Me() + ": restoring table '" + name + "'");
  }
  return Status::OK();
}

Status TableShard::RestoreFrom(const std::map<std::string, Tensor>& tensors, int64_t step) {
  std::map<std::string, SparseTable::Rows> restored;
  for (const auto& [name, table] : tables_) {
    Result<SparseTable::Rows> rows = RowsIn(name, tensors);
    if (!rows.ok()) return rows.status().WithContext(Me() + ": restoring table '" + name + "'");
    restored[name] = std::move(rows).value();
  }
  for (auto& [name, rows] : restored) RETURN_IF_ERROR(tables_.at(name)->Import(rows, step));
  return Status::OK();
}

}  // namespace pstrain::ps
