#include "ps/sparse_tables_config.h"

#include <algorithm>
#include <utility>

namespace pstrain::ps {

Result<SparseTables> ReadSparseTables(const ConfigNode& node, int64_t max_table_rows) {
  RETURN_IF_ERROR(node.CheckKeys({"optimizer", "learning_rate", "clipping", "list"}));
  ASSIGN_OR_RETURN(ConfigNode optimizer_node, node.Child("optimizer"));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, Optimizer::FromConfig(optimizer_node));
  std::shared_ptr<const Optimizer> shared(std::move(optimizer));
  ASSIGN_OR_RETURN(ConfigNode lr_node, node.Child("learning_rate"));
  ASSIGN_OR_RETURN(LearningRateSchedule lr, LearningRateSchedule::FromConfig(lr_node));
  ClippingOptions clipping;
  if (node.Has("clipping")) {
    ASSIGN_OR_RETURN(ConfigNode clipping_node, node.Child("clipping"));
    ASSIGN_OR_RETURN(clipping, ClippingOptions::FromConfig(clipping_node));
  }
  ASSIGN_OR_RETURN(ConfigNode list, node.Child("list"));
  if (!list.IsSequence() || list.size() == 0) return list.Error("must be a non-empty list");
  SparseTables tables;
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(SparseTableOptions options, SparseTableOptions::FromConfig(list.At(i)));
    if (max_table_rows > 0) options.max_rows = std::min(options.max_rows, max_table_rows);
    const std::string name = options.name;
    if (tables.count(name)) return list.At(i).Error("table '" + name + "' is listed twice");
    tables[name] = std::make_unique<SparseTable>(std::move(options), shared, lr, clipping);
  }
  return tables;
}

}  // namespace pstrain::ps
