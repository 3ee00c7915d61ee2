// The `tables:` section of a config, read into one SparseTable per listed table. Both places
// that hold table rows read it: the one-process trainer (worker/training/embedding_tables.h),
// which holds every row, and a parameter server (ps/table_shard.h), which holds the rows it
// owns (common/row_owner.h). One optimizer, learning-rate schedule and clipping serve every
// table of the section, as `train:` does for the dense variables.
//
//   tables:
//     optimizer: {type: adagrad}
//     learning_rate: {initial: 0.05}
//     clipping: {by_norm: 10}      # optional, per step's rows of a table
//     list:
//       - {name: wide_C1, dimension: 1, max_rows: 100000}
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "ps/sparse_table.h"

namespace pstrain::ps {

using SparseTables = std::map<std::string, std::unique_ptr<SparseTable>>;

// Errors name the field (the config's path) and what was expected; a table listed twice is one.
// `max_table_rows` > 0 caps every table's max_rows (--max_table_rows).
Result<SparseTables> ReadSparseTables(const ConfigNode& tables_node, int64_t max_table_rows = 0);

}  // namespace pstrain::ps
