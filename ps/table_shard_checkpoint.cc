// A table shard in the server's checkpoints and replication records: each table's rows (or
// those a push changed) as tensors beside the dense variables, and back. Kept apart from the
// rows' pulls and pushes in table_shard.cc.
#include <algorithm>

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

void TableShard::RowsOf(const std::string& table, const std::vector<int64_t>& ids,
                        std::map<std::string, Tensor>* tensors) const {
  auto it = tables_.find(table);
  if (it == tables_.end()) return;
  PutRows(*it->second, it->second->Export(ids), NamesOf(table, options_.server), tensors);
}

bool TableShard::IsRowTensor(const std::string& name) { return name.rfind("tables/", 0) == 0; }

Status TableShard::Upsert(const std::map<std::string, Tensor>& tensors, int64_t step) {
  std::map<std::string, SparseTable::Rows> changed;
  for (const auto& [name, table] : tables_) {
    Result<SparseTable::Rows> rows = RowsIn(name, tensors);
    if (!rows.ok()) return rows.status().WithContext(Me() + ": table '" + name + "'");
    if (!rows->ids.empty()) changed[name] = std::move(rows).value();
  }
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;
    const bool known = std::any_of(tables_.begin(), tables_.end(), [&](const auto& t) {
      const TableTensorNames names = NamesOf(t.first, options_.server);
      return name == names.ids || name.rfind(names.values, 0) == 0;
    });
    if (!known) {
      return InvalidArgument(Me() + ": '" + name + "' is no row tensor of this server's tables");
    }
  }
  int64_t new_rows = 0;
  for (const auto& [name, rows] : changed) {
    const SparseTable& t = *tables_.at(name);
    for (int64_t id : rows.ids) new_rows += !t.Contains(id);
    if (t.rows() + new_rows > t.options().max_rows) {
      return ResourceExhausted(Me() + ": table '" + name + "' would pass its max_rows " +
                               std::to_string(t.options().max_rows));
    }
    new_rows = 0;
  }
  for (auto& [name, rows] : changed) RETURN_IF_ERROR(tables_.at(name)->Upsert(rows, step));
  return Status::OK();
}

int64_t TableShard::Evict(int64_t step) {
  int64_t evicted = 0;
  for (auto& [name, table] : tables_) evicted += table->Evict(step);
  return evicted;
}

int64_t TableShard::eviction_interval() const {
  int64_t shortest = 0;
  for (const auto& [name, table] : tables_) {
    const int64_t n = table->options().evict_after_steps;
    if (n > 0 && (shortest == 0 || n < shortest)) shortest = n;
  }
  return shortest == 0 ? 0 : std::max<int64_t>(1, shortest / 10);
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
