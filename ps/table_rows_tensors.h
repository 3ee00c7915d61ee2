// A sparse table's rows as checkpoint tensors, and back, for both holders of rows: a server's
// slice of each table (table_shard.h) and the one-process trainer's whole tables
// (worker/training/embedding_tables.h). A checkpoint holds float32 tensors and ids are int64, so
// the ids' bytes are copied, never converted: every id comes back exact.
//
//   <ids>             [n, 2]  each id's eight bytes
//   <values>          [n, D]  the rows, in the ids' order
//   <values>/<slot>   [n, D]  each optimizer slot (SparseTable::slot_names())
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "common/tensor.h"
#include "ps/sparse_table.h"

namespace pstrain::ps {

struct TableTensorNames {
  std::string ids;
  std::string values;
};

// Every row `table` holds, with its slots, into `tensors`.
void PutTableRows(const SparseTable& table, const TableTensorNames& names,
                  std::map<std::string, Tensor>* tensors);
// `rows` of `table` (SparseTable::Export's), with their slots, into `tensors`.
void PutRows(const SparseTable& table, SparseTable::Rows rows, const TableTensorNames& names,
             std::map<std::string, Tensor>* tensors);

// The rows saved under `names`, checked as SparseTable::Import would check them; no rows when
// `tensors` holds neither the ids nor the values (a checkpoint from before the table). DataLoss
// naming the tensor when one is malformed or a slot is missing.
Result<SparseTable::Rows> TableRowsIn(const SparseTable& table, const TableTensorNames& names,
                                      const std::map<std::string, Tensor>& tensors);

}  // namespace pstrain::ps
