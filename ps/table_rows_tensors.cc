#include "ps/table_rows_tensors.h"

#include <cstring>

namespace pstrain::ps {
namespace {

static_assert(2 * sizeof(float) == sizeof(int64_t), "an id is the bytes of two floats");

Tensor IdsAsTensor(const std::vector<int64_t>& ids) {
  Tensor t = Tensor::Uninitialized(Shape{static_cast<int64_t>(ids.size()), 2});
  if (!ids.empty()) std::memcpy(t.data(), ids.data(), ids.size() * sizeof(int64_t));
  return t;
}

}  // namespace

void PutTableRows(const SparseTable& table, const TableTensorNames& names,
                  std::map<std::string, Tensor>* tensors) {
  PutRows(table, table.Export(), names, tensors);
}

void PutRows(const SparseTable& table, SparseTable::Rows rows, const TableTensorNames& names,
             std::map<std::string, Tensor>* tensors) {
  (*tensors)[names.ids] = IdsAsTensor(rows.ids);
  (*tensors)[names.values] = std::move(rows.values);
  const std::vector<std::string> slots = table.slot_names();
  for (size_t s = 0; s < slots.size(); ++s) {
    (*tensors)[names.values + "/" + slots[s]] = std::move(rows.slots[s]);
  }
}

Result<SparseTable::Rows> TableRowsIn(const SparseTable& table, const TableTensorNames& names,
                                      const std::map<std::string, Tensor>& tensors) {
  SparseTable::Rows rows;
  auto ids = tensors.find(names.ids);
  auto values = tensors.find(names.values);
  if (ids == tensors.end() && values == tensors.end()) return rows;  // not saved: no rows
  if (ids == tensors.end() || values == tensors.end()) {
    return DataLoss("the checkpoint holds '" + (ids == tensors.end() ? names.values : names.ids) +
                    "' but not '" + (ids == tensors.end() ? names.ids : names.values) + "'");
  }
  const Tensor& id_bits = ids->second;
  if (id_bits.shape().rank() != 2 || id_bits.dim(1) != 2) {
    return DataLoss("'" + names.ids + "' has shape " + id_bits.shape().ToString() +
                    "; expected [rows,2] (each id's int64 bytes)");
  }
  rows.ids.resize(id_bits.dim(0));
  if (!rows.ids.empty()) {
    std::memcpy(rows.ids.data(), id_bits.data(), rows.ids.size() * sizeof(int64_t));
  }
  rows.values = values->second;
  for (const std::string& slot : table.slot_names()) {
    auto it = tensors.find(names.values + "/" + slot);
    if (it == tensors.end()) {
      return DataLoss("the checkpoint lacks '" + names.values + "/" + slot + "'");
    }
    rows.slots.push_back(it->second);
  }
  RETURN_IF_ERROR(table.CheckImport(rows));
  return rows;
}

}  // namespace pstrain::ps
