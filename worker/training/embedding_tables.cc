#include "worker/training/embedding_tables.h"

#include <algorithm>

namespace pstrain {
namespace worker {
namespace {

Result<std::map<std::string, std::unique_ptr<ps::SparseTable>>> ReadTables(const ConfigNode& node,
                                                                           int64_t max_table_rows) {
  RETURN_IF_ERROR(node.CheckKeys({"optimizer", "learning_rate", "clipping", "list"}));
  ASSIGN_OR_RETURN(ConfigNode optimizer_node, node.Child("optimizer"));
  ASSIGN_OR_RETURN(std::unique_ptr<ps::Optimizer> optimizer,
                   ps::Optimizer::FromConfig(optimizer_node));
  std::shared_ptr<const ps::Optimizer> shared(std::move(optimizer));
  ASSIGN_OR_RETURN(ConfigNode lr_node, node.Child("learning_rate"));
  ASSIGN_OR_RETURN(ps::LearningRateSchedule lr, ps::LearningRateSchedule::FromConfig(lr_node));
  ps::ClippingOptions clipping;
  if (node.Has("clipping")) {
    ASSIGN_OR_RETURN(ConfigNode clipping_node, node.Child("clipping"));
    ASSIGN_OR_RETURN(clipping, ps::ClippingOptions::FromConfig(clipping_node));
  }
  ASSIGN_OR_RETURN(ConfigNode list, node.Child("list"));
  if (!list.IsSequence() || list.size() == 0) return list.Error("must be a non-empty list");
  std::map<std::string, std::unique_ptr<ps::SparseTable>> tables;
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(ps::SparseTableOptions options,
                     ps::SparseTableOptions::FromConfig(list.At(i)));
    if (max_table_rows > 0) options.max_rows = std::min(options.max_rows, max_table_rows);
    const std::string name = options.name;
    if (tables.count(name)) return list.At(i).Error("table '" + name + "' is listed twice");
    tables[name] = std::make_unique<ps::SparseTable>(std::move(options), shared, lr, clipping);
  }
  return tables;
}

}  // namespace

Result<std::unique_ptr<EmbeddingTables>> EmbeddingTables::Create(const ConfigNode& tables_node,
                                                                 Model* model,
                                                                 int64_t max_table_rows) {
  auto tables = std::unique_ptr<EmbeddingTables>(new EmbeddingTables());
  ASSIGN_OR_RETURN(tables->tables_, ReadTables(tables_node, max_table_rows));
  for (size_t i = 0; i < model->layers().size(); ++i) {
    auto* layer = dynamic_cast<Embedding*>(model->layers()[i].get());
    if (layer == nullptr) continue;
    const int source = model->layer_inputs(static_cast<int>(i))[0];
    if (source >= 0) {
      return InvalidArgument(layer->Describe() + " must read a model input (an id feature), not " +
                             model->layers()[source]->Describe());
    }
    auto table = tables->tables_.find(layer->table());
    if (table == tables->tables_.end()) {
      return tables_node.Error(layer->Describe() + " names table '" + layer->table() +
                               "', which 'list' does not hold");
    }
    if (table->second->dimension() != layer->dimension()) {
      return InvalidArgument(layer->Describe() + " has dimension " +
                             std::to_string(layer->dimension()) + " but table '" + layer->table() +
                             "' has " + std::to_string(table->second->dimension()));
    }
    tables->bindings_.push_back({layer, -1 - source, table->second.get()});
  }
  if (tables->bindings_.empty()) {
    return tables_node.Error("the model has no embedding layer to read these tables");
  }
  return tables;
}

const ps::SparseTable* EmbeddingTables::Find(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

bool EmbeddingTables::Holds(const Variable* v) const {
  for (const Binding& b : bindings_) {
    if (&b.layer->variables()[0] == v) return true;
  }
  return false;
}

Status EmbeddingTables::Gather(const FeatureBatch& batch, int64_t step, bool training) {
  for (const Binding& b : bindings_) {
    const std::vector<int64_t>& ids = batch.ids[b.input];
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n > b.layer->rows()) {
      return InvalidArgument(b.layer->Describe() + ": the batch has " + std::to_string(n) +
                             " distinct ids, more than its rows " +
                             std::to_string(b.layer->rows()) + " (raise rows)");
    }
    Tensor rows;
    if (training) {
      ASSIGN_OR_RETURN(rows, b.table->Gather(ids, step));
    } else {
      rows = b.table->Lookup(ids);
    }
    Tensor& value = b.layer->variables()[0].value;
    std::copy(rows.data(), rows.data() + rows.size(), value.data());
    std::fill(value.data() + rows.size(), value.data() + value.size(), 0.0f);
  }
  return Status::OK();
}

Status EmbeddingTables::Apply(const FeatureBatch& batch, int64_t step) {
  for (const Binding& b : bindings_) {
    const std::vector<int64_t>& ids = batch.ids[b.input];
    Tensor& grad = b.layer->variables()[0].grad;
    const Tensor rows = Tensor::Wrap(Shape{static_cast<int64_t>(ids.size()), b.layer->dimension()},
                                     grad.data(), nullptr);
    Status applied = b.table->Apply(ids, ids.empty() ? Tensor() : rows, step);
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

}  // namespace worker
}  // namespace pstrain
