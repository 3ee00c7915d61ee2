// An embedding table held row by row: rows of `dimension` floats keyed by int64 id in a hash map,
// so that a table of millions of possible ids holds only the rows some batch touched. A dense
// variable (variable_store.h) is read and updated whole; here a step gathers the rows of its ids
// and applies a gradient to those rows only, as TensorFlow's sparse optimizer ops do
// (SparseApplyAdagrad, SparseApplyFtrl, and LazyAdam for Adam: moments decay only on touched
// rows, the bias correction still follows the global step).
//
// The per-row update is the dense optimizer's own (Optimizer::UpdateRow) over the row and its
// slots, so every registered optimizer has a sparse form with the same arithmetic; the learning
// rate schedule and the per-tensor clipping are the dense variables' too (learning_rate.h,
// clipping.h), applied to the step's deduplicated gradient rows.
//
// Rows appear on first touch, filled by the initializer from the id and the seed alone (so a
// row's first value does not depend on which ids came before it). With `min_count` K > 1, an id
// gets a row only once it has been gathered K times; until then it reads zeros and its gradients
// are dropped. With `evict_after_steps` N > 0, Evict drops rows (and pending counts) untouched
// for N steps. `max_rows` bounds the rows, and the pending counts separately: a gather that would
// create more rows fails naming the table and changes nothing; an id arriving while the pending
// counts are full is not counted until eviction frees room.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"
#include "ps/clipping.h"
#include "ps/learning_rate.h"
#include "ps/optimizer.h"

namespace pstrain::ps {

// How a row is filled when it is created.
struct RowInitializer {
  enum class Kind { kZeros, kUniform, kNormal };
  Kind kind = Kind::kNormal;
  float scale = 0.01f;  // uniform: [-scale, scale]; normal: the standard deviation
};

// One table's fields, as the config writes them:
//   {name: C1, dimension: 8, max_rows: 1000000, min_count: 1, evict_after_steps: 0,
//    initializer: {type: normal, scale: 0.01}, seed: 1}
struct SparseTableOptions {
  std::string name;
  int64_t dimension = 0;          // > 0
  int64_t max_rows = 0;           // > 0
  int64_t min_count = 1;          // >= 1: gathers before an id gets a row
  int64_t evict_after_steps = 0;  // >= 0; 0 never evicts
  RowInitializer initializer;
  uint64_t seed = 1;

  static Result<SparseTableOptions> FromConfig(const ConfigNode& node);
  // Errors name the field and the expected value.
  Status Validate() const;
};

class SparseTable {
 public:
  // `optimizer` may be shared by several tables; clipping is the per-tensor kind only
  // (ClippingOptions::ServerSide): the global norm is the caller's, over the whole step.
  SparseTable(SparseTableOptions options, std::shared_ptr<const Optimizer> optimizer,
              LearningRateSchedule learning_rate, ClippingOptions clipping);

  const SparseTableOptions& options() const { return options_; }
  int64_t dimension() const { return options_.dimension; }
  // Rows held now.
  int64_t rows() const { return static_cast<int64_t>(index_.size()); }
  bool Contains(int64_t id) const { return index_.count(id) > 0; }

  // The rows of `ids` (repeats allowed) as [ids.size(), dimension], creating the admitted ones
  // that are new and marking every row touched at `step`. Ids without a row read zeros. Fails,
  // changing nothing, on a negative id or when the new rows would pass max_rows.
  Result<Tensor> Gather(const std::vector<int64_t>& ids, int64_t step);
  // The rows of `ids` as they are, zeros for ids without a row, creating, counting and touching
  // nothing (evaluation).
  Tensor Lookup(const std::vector<int64_t>& ids) const;
  // One optimizer step on the rows of `ids` from `grads` [ids.size(), dimension]: the rows of a
  // repeated id are summed first (one update per row, as TensorFlow deduplicates indexed slices),
  // then clipped and applied at the rate of `step`. Ids without a row are skipped. Fails,
  // changing nothing, on a shape mismatch, a negative id, or a non-finite gradient or one beyond
  // the optimizer's bound.
  Status Apply(const std::vector<int64_t>& ids, const Tensor& grads, int64_t step);
  // Why Apply would refuse `grads` for `ids` before summing them (shape, a negative id, a
  // non-finite element), or OK.
  Status CheckGradients(const std::vector<int64_t>& ids, const Tensor& grads) const;
  // Drops the rows and pending counts untouched for evict_after_steps steps before `step`;
  // returns how many rows went. Nothing when evict_after_steps is 0.
  int64_t Evict(int64_t step);

  // Every row held, for checkpoints: their ids, values [n, dimension] and one [n, dimension]
  // tensor per optimizer slot (slot_names() order), rows in the same order.
  struct Rows {
    std::vector<int64_t> ids;
    Tensor values;
    std::vector<Tensor> slots;
  };
  Rows Export() const;
  // The rows of `ids` that this table holds, each once in the order first named, as Export
  // gives them: what a replication record carries of the rows a push changed.
  Rows Export(const std::vector<int64_t>& ids) const;
  // Why Import would refuse `rows` (shapes, the slots' count, ids negative or repeated, more
  // than max_rows), or OK.
  Status CheckImport(const Rows& rows) const;
  // Replaces every row with `rows` (as Export gives them), touched at `step`, and forgets the
  // pending counts. Fails, changing nothing, when CheckImport does.
  Status Import(const Rows& rows, int64_t step);
  // Sets the rows of `rows` (creating those it lacks) to their values and slots, touched at
  // `step`; every other row stays as it is. Fails, changing nothing, when CheckImport does or
  // the rows created would pass max_rows.
  Status Upsert(const Rows& rows, int64_t step);
  std::vector<std::string> slot_names() const;

  // The row of `id` and its optimizer slot `slot` (slot_names() order), or null: for tests and
  // checkpoints.
  const float* Row(int64_t id) const;
  const float* Slot(int64_t id, int slot) const;

 private:
  struct Pending {
    int64_t count = 0;
    int64_t last_step = 0;
  };
  // Where row `r`'s values start in storage_; its slots follow, dimension floats each.
  int64_t Stride() const { return options_.dimension * (1 + num_slots_); }
  float* RowAt(int64_t r) { return storage_.data() + r * Stride(); }
  const float* RowAt(int64_t r) const { return storage_.data() + r * Stride(); }
  // Which ids of a gather are admitted now (the pending counts after it), without changing them.
  bool Admits(int64_t id, int64_t repeats_in_batch) const;
  void CountPending(int64_t id, int64_t step);
  void CreateRow(int64_t id, int64_t step);
  // Row `r` into entry `i` of `out`, and entry `i` of `in` into row `r`.
  void CopyOut(int64_t r, int64_t i, Rows* out) const;
  void CopyIn(const Rows& in, int64_t i, int64_t r);

  SparseTableOptions options_;
  std::shared_ptr<const Optimizer> optimizer_;
  LearningRateSchedule learning_rate_;
  ClippingOptions clipping_;
  int num_slots_ = 0;
  std::vector<float> slot_initial_;             // per slot, the value a new row's slot starts at
  std::unordered_map<int64_t, int64_t> index_;  // id -> row slot in storage_
  std::vector<int64_t> last_step_;              // per row slot: the last step that touched it
  std::vector<int64_t> row_ids_;                // per row slot: its id, or -1 when free
  std::vector<int64_t> free_;                   // row slots evicted rows left
  std::vector<float> storage_;
  std::unordered_map<int64_t, Pending> pending_;  // ids seen fewer than min_count times
};

}  // namespace pstrain::ps
