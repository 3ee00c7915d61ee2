// What an ONNX export (onnx_export.h) reads of a click model's sparse tables: the whole table
// over the ids each id feature can carry, [0, hash_buckets). A row the table holds goes in as it
// is; an id without a row (never touched, or not yet admitted) as zeros, which is what pstrain's
// own evaluation reads for it (SparseTable::Lookup): a served model scores every id as the
// run's reported test AUC did. The exporter sees only a callback, not EmbeddingTables.
#pragma once

#include <cstdint>

#include "common/data/feature_example.h"
#include "common/status.h"
#include "common/tensor.h"
#include "ps/sparse_table.h"
#include "worker/training/embedding_tables.h"
#include "worker/training/onnx_export.h"

namespace pstrain {
namespace worker {

// The rows of ids [0, n) of `table` as [n, dimension], zeros for ids it holds no row of.
Tensor DenseTableRows(const ps::SparseTable& table, int64_t n);

// Each id feature of `schema` with its hash_buckets, and rows read from `tables` (which must
// outlive the result) by DenseTableRows; a table `tables` lacks is an error naming it.
OnnxTableRows OnnxTableRowsOf(const EmbeddingTables& tables, const FeatureSchema& schema);

// Why an export of these tables cannot be written ("" when it can), known before training: an
// embedding reading an id feature without hash_buckets (its ids are unbounded, so its table has
// no whole form), or tables over their buckets too large for one ONNX file (2 GiB).
std::string OnnxExportBlocker(const EmbeddingTables& tables, const Model& model,
                              const FeatureSchema& schema);

}  // namespace worker
}  // namespace pstrain
