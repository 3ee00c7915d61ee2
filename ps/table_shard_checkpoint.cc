// A table shard in the server's checkpoints: each table's rows as tensors beside the dense
// variables, and back. Kept apart from the rows' pulls and pushes in table_shard.cc.
#include <cstring>

#include "ps/table_shard.h"

namespace pstrain::ps {
namespace {

// "tables/C1/rows/part_1": this server's part of the table, named as a variable split across
// servers is, so that a cluster's shards join into whole tables (joined_checkpoint.h: the parts'
// rows stacked in server order, ids and slots alike).
std::string NameOf(const std::string& table, const std::string& what, int server,
                   const std::string& slot = "") {
  return "tables/" + table + "/" + what + "/part_" + std::to_string(server) +
         (slot.empty() ? "" : "/" + slot);
}

// Ids are int64; a checkpoint holds float32 tensors. Their bytes are copied, never converted, so
// every id comes back exact: [n, 2] floats hold n ids.
Tensor IdsAsTensor(const std::vector<int64_t>& ids) {
  Tensor t = Tensor::Uninitialized(Shape{static_cast<int64_t>(ids.size()), 2});
  if (!ids.empty()) std::memcpy(t.data(), ids.data(), ids.size() * sizeof(int64_t));
  return t;
}

static_assert(2 * sizeof(float) == sizeof(int64_t), "an id is the bytes of two floats");

}  // namespace

void TableShard::SaveTo(std::map<std::string, Tensor>* tensors) const {
  for (const auto& [name, table] : tables_) {
    SparseTable::Rows rows = table->Export();
    const int k = options_.server;
    (*tensors)[NameOf(name, "ids", k)] = IdsAsTensor(rows.ids);
    (*tensors)[NameOf(name, "rows", k)] = rows.values;
    const std::vector<std::string> slots = table->slot_names();
    for (size_t s = 0; s < slots.size(); ++s) {
      (*tensors)[NameOf(name, "rows", k, slots[s])] = rows.slots[s];
    }
  }
}

Result<SparseTable::Rows> TableShard::RowsIn(const std::string& name,
                                             const std::map<std::string, Tensor>& tensors) const {
  const int k = options_.server;
  SparseTable::Rows rows;
  auto ids = tensors.find(NameOf(name, "ids", k));
  auto values = tensors.find(NameOf(name, "rows", k));
  if (ids == tensors.end() || values == tensors.end()) return rows;  // not saved: no rows
  const Tensor& id_bits = ids->second;
  if (id_bits.shape().rank() != 2 || id_bits.dim(1) != 2) {
    return DataLoss("'" + ids->first + "' has shape " + id_bits.shape().ToString() +
                    "; expected [rows,2] (each id's int64 bytes)");
  }
  rows.ids.resize(id_bits.dim(0));
  if (!rows.ids.empty()) std::memcpy(rows.ids.data(), id_bits.data(), rows.ids.size() * 8);
  rows.values = values->second;
  for (const std::string& slot : tables_.at(name)->slot_names()) {
    auto it = tensors.find(NameOf(name, "rows", k, slot));
    if (it == tensors.end()) {
      return DataLoss("the checkpoint lacks '" + NameOf(name, "rows", k, slot) + "'");
    }
    rows.slots.push_back(it->second);
  }
  RETURN_IF_ERROR(tables_.at(name)->CheckImport(rows));
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
