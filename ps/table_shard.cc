#include "ps/table_shard.h"

#include "common/row_owner.h"
#include "ps/largest_exponent.h"

namespace pstrain::ps {

Result<std::unique_ptr<TableShard>> TableShard::FromConfig(const ConfigNode& tables_node,
                                                           int64_t max_table_rows,
                                                           TableShardOptions options) {
  if (options.servers <= 0 || options.server < 0 || options.server >= options.servers) {
    return InvalidArgument("a table shard needs 0 <= server < servers; got server " +
                           std::to_string(options.server) + " of " +
                           std::to_string(options.servers));
  }
  ASSIGN_OR_RETURN(SparseTables tables, ReadSparseTables(tables_node, max_table_rows));
  return std::make_unique<TableShard>(std::move(tables), options);
}

TableShard::TableShard(SparseTables tables, TableShardOptions options)
    : tables_(std::move(tables)), options_(options), magnitude_(options.outlier_binades) {}

Status TableShard::Known(const std::string& name) const {
  if (tables_.count(name)) return Status::OK();
  std::string known;
  for (const auto& [n, t] : tables_) known += (known.empty() ? "" : ", ") + n;
  return NotFound(Me() + " holds no table '" + name + "'; its tables are " + known);
}

Result<SparseTable*> TableShard::Table(const std::string& name) {
  RETURN_IF_ERROR(Known(name));
  return tables_.at(name).get();
}

Status TableShard::CheckOwned(const std::string& table, const std::vector<int64_t>& ids) const {
  RETURN_IF_ERROR(Known(table));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) continue;  // the table refuses it, naming its position
    const int owner = RowOwner(table, ids[i], options_.servers);
    if (owner != options_.server) {
      return InvalidArgument("table '" + table + "': id " + std::to_string(ids[i]) + " (position " +
                             std::to_string(i) + ") belongs to ps " + std::to_string(owner) +
                             ", not to " + Me() + " (of " + std::to_string(options_.servers) +
                             " servers)");
    }
  }
  return Status::OK();
}

Result<Tensor> TableShard::Pull(const std::string& table, const std::vector<int64_t>& ids,
                                int64_t step, bool training) {
  ASSIGN_OR_RETURN(SparseTable * t, Table(table));
  // The reply is ids x dimension floats even for ids without a row: a batch's distinct ids fit
  // in the table, so more than max_rows is refused before anything is allocated.
  if (static_cast<int64_t>(ids.size()) > t->options().max_rows) {
    return InvalidArgument("table '" + table + "': a pull of " + std::to_string(ids.size()) +
                           " ids, more than its max_rows " + std::to_string(t->options().max_rows) +
                           " on " + Me());
  }
  RETURN_IF_ERROR(CheckOwned(table, ids));
  if (!training) return t->Lookup(ids);
  Result<Tensor> rows = t->Gather(ids, step);
  if (!rows.ok()) return rows.status().WithContext(Me());
  return rows;
}

Result<Tensor> TableShard::Checked(const std::string& sender, const std::string& table,
                                   const std::vector<int64_t>& ids, const Tensor& grads) {
  ASSIGN_OR_RETURN(SparseTable * t, Table(table));
  RETURN_IF_ERROR(CheckOwned(table, ids));
  // Checked before the guard records the push: a refused push changes nothing.
  if (Status s = t->CheckGradients(ids, grads); !s.ok()) return s.WithContext(Me());
  std::vector<std::pair<std::string, Tensor>> scaled = {{table, grads}};
  const uint32_t exponent = grads.empty() ? 0 : LargestExponent(grads);
  magnitude_.ScaleDown(sender + " rows", exponent, &scaled);
  return scaled[0].second;
}

Status TableShard::Push(const std::string& sender, const std::string& table,
                        const std::vector<int64_t>& ids, const Tensor& grads, int64_t step) {
  ASSIGN_OR_RETURN(Tensor scaled, Checked(sender, table, ids, grads));
  Status applied = tables_.at(table)->Apply(ids, scaled, step);
  return applied.ok() ? applied : applied.WithContext(Me());
}

Status TableShard::AddToWindow(const std::string& sender, const std::string& table,
                               const std::vector<int64_t>& ids, const Tensor& grads, int64_t step) {
  ASSIGN_OR_RETURN(Tensor scaled, Checked(sender, table, ids, grads));
  if (window_.empty()) window_.set_opened_at(step);
  Status added = window_.Add(table, ids, scaled, tables_.at(table)->options().max_rows);
  return added.ok() ? added : added.WithContext(Me());
}

std::map<std::string, std::vector<int64_t>> TableShard::ApplyWindow(int64_t window_pushes,
                                                                    std::string* failed) {
  const int64_t step = window_.opened_at();
  std::map<std::string, std::vector<int64_t>> changed;
  for (auto& [table, mean] : window_.Take(window_pushes)) {
    Status s = tables_.at(table)->Apply(mean.ids, mean.rows, step);
    if (!s.ok()) {
      *failed += (failed->empty() ? "" : "; ") + s.message();
      continue;
    }
    changed[table] = std::move(mean.ids);
  }
  return changed;
}

bool TableShard::Applied(const std::string& sender, uint64_t incarnation, uint64_t sequence) const {
  auto it = last_push_.find(sender);
  return it != last_push_.end() && it->second.incarnation == incarnation &&
         sequence <= it->second.sequence;
}

void TableShard::NoteApplied(const std::string& sender, uint64_t incarnation, uint64_t sequence) {
  last_push_[sender] = {incarnation, sequence};
}

std::vector<const SparseTable*> TableShard::all() const {
  std::vector<const SparseTable*> out;
  for (const auto& [name, table] : tables_) out.push_back(table.get());
  return out;
}

const SparseTable* TableShard::Find(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

int64_t TableShard::rows() const {
  int64_t n = 0;
  for (const auto& [name, t] : tables_) n += t->rows();
  return n;
}

}  // namespace pstrain::ps
