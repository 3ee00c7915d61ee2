// This server's rows of the embedding tables. A table is not one variable on one server: its
// rows are spread over every server by id (common/row_owner.h), and each server holds a
// SparseTable (ps/sparse_table.h) with the rows it owns. A worker pulls the rows of its batch's
// distinct ids from their owners and pushes row gradients (ids and rows) back to them, so a
// step moves the rows it touched and nothing else.
//
// ParameterServer only routes the row requests here (ps/server_rows.cc); the dense path's
// checks apply to rows as well: ids must be this server's (a row lives on its owner alone),
// gradients finite, within the optimizer's bound, and scaled down when their largest element is
// an outlier for their sender (ps/magnitude_guard.h). A push is checked whole before any row
// changes. The tables' optimizer, learning-rate schedule and clipping come from the config's
// `tables:` section (ps/sparse_tables_config.h), as the dense ones come from `train:`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"
#include "ps/magnitude_guard.h"
#include "ps/row_pull_ledger.h"
#include "ps/row_window.h"
#include "ps/sparse_tables_config.h"

namespace pstrain::ps {

struct TableShardOptions {
  int server = 0;   // this server's task index: which rows it owns
  int servers = 1;  // the cluster's parameter servers (--ps_hosts)
  // As ServerOptions::outlier_binades (--gradient_outlier_binades); 0: off.
  int outlier_binades = 0;
};

class TableShard {
 public:
  // Reads the tables (errors name the config's field); `max_table_rows` > 0 caps each table's
  // rows on this server (--max_table_rows).
  static Result<std::unique_ptr<TableShard>> FromConfig(const ConfigNode& tables_node,
                                                        int64_t max_table_rows,
                                                        TableShardOptions options);
  TableShard(SparseTables tables, TableShardOptions options);

  // The rows of `ids` (repeats allowed) as [ids.size(), dimension] in the order asked. With
  // `training` rows are created on first touch and marked touched at `step` (SparseTable::
  // Gather); without (an evaluator) they are only read. Fails, changing nothing, for an unknown
  // table, more ids than its max_rows (the reply's size), an id this server does not own, or a
  // table that would grow past its max_rows.
  Result<Tensor> Pull(const std::string& table, const std::vector<int64_t>& ids, int64_t step,
                      bool training);
  // One optimizer step at the rate of `step` on the rows of `ids` from `grads` [ids.size(),
  // dimension], pushed by `sender` ("worker 1", whose outlier bound it is). Fails, changing
  // nothing, for an unknown table, an id this server does not own, a gradient of the wrong
  // shape, non-finite or beyond the optimizer's bound.
  Status Push(const std::string& sender, const std::string& table, const std::vector<int64_t>& ids,
              const Tensor& grads, int64_t step);
  // Accumulate and sync modes (ps/row_window.h): Push's checks and outlier scaling, after which
  // the rows join the open window instead of being applied; `step` is the global step now.
  // Fails, changing nothing, as Push does, or when the window would sum more ids than the
  // table's max_rows.
  Status AddToWindow(const std::string& sender, const std::string& table,
                     const std::vector<int64_t>& ids, const Tensor& grads, int64_t step);
  // Whether a window is open that the global step has left (`step` is past the one it opened at).
  bool WindowClosedBy(int64_t step) const { return !window_.empty() && step > window_.opened_at(); }
  // Applies the open window's mean rows (over `window_pushes` pushes at least) at the step it
  // opened at and empties it; returns the ids changed, by table. A table whose mean the
  // optimizer refuses is named in `failed` and changes nothing.
  std::map<std::string, std::vector<int64_t>> ApplyWindow(int64_t window_pushes,
                                                          std::string* failed);

  // Row pushes are numbered per sender process (wire::Message::sequence), so a retried one is
  // answered without being applied twice: whether `sender`'s push `sequence` from process
  // `incarnation` was applied already, and noting one that was. One entry per sender.
  bool Applied(const std::string& sender, uint64_t incarnation, uint64_t sequence) const;
  void NoteApplied(const std::string& sender, uint64_t incarnation, uint64_t sequence);

  // NotFound for a table this server does not hold; InvalidArgument naming the table, the first
  // id this server does not own, its owner and this server.
  Status CheckOwned(const std::string& table, const std::vector<int64_t>& ids) const;
  // Which row pushes follow a pull of their rows (ps/row_pull_ledger.h).
  RowPullLedger& pulls() { return pulls_; }

  // Every table's rows as checkpoint tensors beside the dense variables, as this server's part
  // k of a split variable: "tables/<table>/ids/part_<k>" (the int64 ids' bytes as [rows, 2]
  // float32, copied, never converted), "tables/<table>/rows/part_<k>" [rows, dimension] and
  // ".../rows/part_<k>/<slot>" per optimizer slot, so a cluster's shards join into whole tables
  // (common/checkpoint/joined_checkpoint.h; ps/table_shard_checkpoint.cc).
  void SaveTo(std::map<std::string, Tensor>* tensors) const;
  // Why RestoreFrom would refuse checkpoint `tensors`, naming the table and the tensor that does
  // not fit, or OK: so that a restore can check every part before it changes any.
  Status CheckRestore(const std::map<std::string, Tensor>& tensors) const;
  // Replaces every table's rows with the checkpoint's (none for a table it lacks), touched at
  // `step`. Fails, changing nothing, when CheckRestore does.
  Status RestoreFrom(const std::map<std::string, Tensor>& tensors, int64_t step);

  // Replication (docs/replication.md section 3): a head sends its backups the rows a push
  // changed, as they are after it, named as SaveTo names them (so that a backup's state is the
  // head's, whatever the arithmetic), and a copy to a joiner is SaveTo's whole tables.
  // The rows of `ids` of `table` held here, with their slots, into `tensors`.
  void RowsOf(const std::string& table, const std::vector<int64_t>& ids,
              std::map<std::string, Tensor>* tensors) const;
  // Sets the rows `tensors` carry (SaveTo's names; tables it does not name stay as they are),
  // touched at `step`. Fails, changing nothing, on a malformed tensor, an id this server does
  // not own or a table that would pass its max_rows, naming the table.
  Status Upsert(const std::map<std::string, Tensor>& tensors, int64_t step);
  // Whether `name` is one of SaveTo's (rows, not a dense variable).
  static bool IsRowTensor(const std::string& name);
  // Drops the rows untouched for each table's evict_after_steps before `step` (SparseTable::
  // Evict); returns how many went.
  int64_t Evict(int64_t step);
  // How often (in global steps) Evict is worth calling: a tenth of the shortest
  // evict_after_steps, at least 1; 0 when no table evicts.
  int64_t eviction_interval() const;

  // Every table, in name order.
  std::vector<const SparseTable*> all() const;
  // The table named `name`, or null: for tests and checkpoints.
  const SparseTable* Find(const std::string& name) const;
  // Rows held here, over every table.
  int64_t rows() const;

 private:
  // The table, or NotFound naming it and the tables there are.
  Result<SparseTable*> Table(const std::string& name);
  Status Known(const std::string& name) const;
  // Push's checks of `grads` from `sender` for the rows of `ids`, and the gradient scaled down
  // when its largest element is an outlier for that sender (ps/magnitude_guard.h).
  Result<Tensor> Checked(const std::string& sender, const std::string& table,
                         const std::vector<int64_t>& ids, const Tensor& grads);
  std::string Me() const { return "ps " + std::to_string(options_.server); }
  // Table `name`'s rows in checkpoint `tensors`, checked (none when it saved none).
  Result<SparseTable::Rows> RowsIn(const std::string& name,
                                   const std::map<std::string, Tensor>& tensors) const;

  SparseTables tables_;
  TableShardOptions options_;
  MagnitudeGuard magnitude_;
  struct LastPush {
    uint64_t incarnation = 0;
    uint64_t sequence = 0;
  };
  std::map<std::string, LastPush> last_push_;  // by sender
  RowPullLedger pulls_;
  RowWindow window_;
};

}  // namespace pstrain::ps
