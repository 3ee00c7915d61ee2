#include "worker/training/embedding_bindings.h"

namespace pstrain {
namespace worker {

Result<std::vector<EmbeddingBinding>> BindEmbeddings(const ConfigNode& tables_node, Model* model,
                                                     const ps::SparseTables& tables) {
  std::vector<EmbeddingBinding> bindings;
  for (size_t i = 0; i < model->layers().size(); ++i) {
    auto* layer = dynamic_cast<Embedding*>(model->layers()[i].get());
    if (layer == nullptr) continue;
    const int source = model->layer_inputs(static_cast<int>(i))[0];
    if (source >= 0) {
      return InvalidArgument(layer->Describe() + " must read a model input (an id feature), not " +
                             model->layers()[source]->Describe());
    }
    auto table = tables.find(layer->table());
    if (table == tables.end()) {
      return tables_node.Error(layer->Describe() + " names table '" + layer->table() +
                               "', which 'list' does not hold");
    }
    if (table->second->dimension() != layer->dimension()) {
      return InvalidArgument(layer->Describe() + " has dimension " +
                             std::to_string(layer->dimension()) + " but table '" + layer->table() +
                             "' has " + std::to_string(table->second->dimension()));
    }
    bindings.push_back({layer, -1 - source, layer->table()});
  }
  if (bindings.empty()) {
    return tables_node.Error("the model has no embedding layer to read these tables");
  }
  return bindings;
}

Status CheckRowsFit(const EmbeddingBinding& b, size_t distinct_ids) {
  if (static_cast<int64_t>(distinct_ids) <= b.layer->rows()) return Status::OK();
  return InvalidArgument(b.layer->Describe() + ": the batch has " + std::to_string(distinct_ids) +
                         " distinct ids, more than its rows " + std::to_string(b.layer->rows()) +
                         " (raise rows)");
}

Variable& RowsOf(const EmbeddingBinding& b) { return b.layer->variables()[0]; }

}  // namespace worker
}  // namespace pstrain
