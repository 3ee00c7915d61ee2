// Which table each embedding layer of a model reads, checked once: the layer must read a model
// input (an id feature) and name a table of the config's `tables:` list, of its dimension. Both
// holders of the rows bind layers this way: the one-process tables (embedding_tables.h) and the
// servers' (worker/distributed/remote_tables.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"
#include "ps/sparse_tables_config.h"
#include "worker/network/layers/embedding.h"
#include "worker/network/model.h"

namespace pstrain {
namespace worker {

struct EmbeddingBinding {
  Embedding* layer;
  int input;          // the model input holding its slot indices
  std::string table;  // a table of the list
};

// Every embedding layer of `model` bound to its table of `tables` (read from `tables_node`,
// which errors name). A model without an embedding layer is an error too.
Result<std::vector<EmbeddingBinding>> BindEmbeddings(const ConfigNode& tables_node, Model* model,
                                                     const ps::SparseTables& tables);

// InvalidArgument naming the layer when a batch's `distinct_ids` are more than its rows.
Status CheckRowsFit(const EmbeddingBinding& b, size_t distinct_ids);

// The binding's gathered rows: its layer's "rows" variable.
Variable& RowsOf(const EmbeddingBinding& b);

}  // namespace worker
}  // namespace pstrain
