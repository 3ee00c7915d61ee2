#include "ps/sparse_tables_config.h"

#include <algorithm>
#include <utility>

#include "ps/update_rule.h"

namespace pstrain::ps {

Result<SparseTables> ReadSparseTables(const ConfigNode& node, int64_t max_table_rows) {
  RETURN_IF_ERROR(node.CheckKeys({"optimizer", "learning_rate", "clipping", "list"}));
  ASSIGN_OR_RETURN(UpdateRule rule, ReadUpdateRule(node));
  std::shared_ptr<const Optimizer> shared(std::move(rule.optimizer));
  ASSIGN_OR_RETURN(ConfigNode list, node.Child("list"));
  if (!list.IsSequence() || list.size() == 0) return list.Error("must be a non-empty list");
  SparseTables tables;
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(SparseTableOptions options, SparseTableOptions::FromConfig(list.At(i)));
    if (max_table_rows > 0) options.max_rows = std::min(options.max_rows, max_table_rows);
    const std::string name = options.name;
    if (tables.count(name)) return list.At(i).Error("table '" + name + "' is listed twice");
    tables[name] = std::make_unique<SparseTable>(std::move(options), shared, rule.learning_rate,
                                                 rule.clipping);
  }
  return tables;
}

}  // namespace pstrain::ps
