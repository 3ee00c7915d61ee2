// SparseTable's rows taken out whole and put back (checkpoints): kept apart from the step's
// gather and apply in sparse_table.cc.
#include <algorithm>
#include <unordered_set>

#include "ps/sparse_table.h"

namespace pstrain::ps {

std::vector<std::string> SparseTable::slot_names() const { return optimizer_->slot_names(); }

namespace {

SparseTable::Rows EmptyRows(int64_t n, int64_t d, int slots) {
  SparseTable::Rows out;
  out.ids.reserve(n);
  out.values = Tensor::Uninitialized(Shape{n, d});
  for (int s = 0; s < slots; ++s) out.slots.push_back(Tensor::Uninitialized(Shape{n, d}));
  return out;
}

}  // namespace

void SparseTable::CopyOut(int64_t r, int64_t i, Rows* out) const {
  const int64_t d = options_.dimension;
  out->ids.push_back(row_ids_[r]);
  const float* row = RowAt(r);
  std::copy(row, row + d, out->values.data() + i * d);
  for (int s = 0; s < num_slots_; ++s) {
    std::copy(row + (1 + s) * d, row + (2 + s) * d, out->slots[s].data() + i * d);
  }
}

void SparseTable::CopyIn(const Rows& in, int64_t i, int64_t r) {
  const int64_t d = options_.dimension;
  float* row = RowAt(r);
  const float* value = in.values.data() + i * d;
  std::copy(value, value + d, row);
  for (int s = 0; s < num_slots_; ++s) {
    const float* slot = in.slots[s].data() + i * d;
    std::copy(slot, slot + d, row + (1 + s) * d);
  }
}

SparseTable::Rows SparseTable::Export() const {
  Rows out = EmptyRows(rows(), options_.dimension, num_slots_);
  int64_t i = 0;
  for (int64_t r = 0; r < static_cast<int64_t>(row_ids_.size()); ++r) {
    if (row_ids_[r] >= 0) CopyOut(r, i++, &out);
  }
  return out;
}

SparseTable::Rows SparseTable::Export(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> held;
  std::unordered_set<int64_t> seen;
  for (int64_t id : ids) {
    auto it = index_.find(id);
    if (it != index_.end() && seen.insert(id).second) held.push_back(it->second);
  }
  Rows out = EmptyRows(static_cast<int64_t>(held.size()), options_.dimension, num_slots_);
  for (size_t i = 0; i < held.size(); ++i) CopyOut(held[i], static_cast<int64_t>(i), &out);
  return out;
}

Status SparseTable::CheckImport(const Rows& in) const {
  const std::string who = "table '" + options_.name + "': ";
  const int64_t n = static_cast<int64_t>(in.ids.size());
  const Shape want{n, options_.dimension};
  if (in.values.shape() != want) {
    return InvalidArgument(who + "rows of shape " + in.values.shape().ToString() + " for " +
                           std::to_string(n) + " ids; expected " + want.ToString());
  }
  if (static_cast<int>(in.slots.size()) != num_slots_) {
    return InvalidArgument(who + std::to_string(in.slots.size()) + " slots; the " +
                           optimizer_->name() + " optimizer keeps " + std::to_string(num_slots_));
  }
  for (const Tensor& slot : in.slots) {
    if (slot.shape() != want) {
      return InvalidArgument(who + "a slot of shape " + slot.shape().ToString() + "; expected " +
                             want.ToString());
    }
  }
  if (n > options_.max_rows) {
    return ResourceExhausted(who + std::to_string(n) + " rows, over max_rows " +
                             std::to_string(options_.max_rows));
  }
  std::unordered_set<int64_t> seen;
  for (int64_t id : in.ids) {
    if (id < 0 || !seen.insert(id).second) {
      return InvalidArgument(who + "id " + std::to_string(id) +
                             (id < 0 ? " is negative" : " is listed twice"));
    }
  }
  return Status::OK();
}

Status SparseTable::Import(const Rows& in, int64_t step) {
  RETURN_IF_ERROR(CheckImport(in));
  index_.clear();
  last_step_.clear();
  row_ids_.clear();
  free_.clear();
  storage_.clear();
  pending_.clear();
  return Upsert(in, step);
}

Status SparseTable::Upsert(const Rows& in, int64_t step) {
  RETURN_IF_ERROR(CheckImport(in));
  int64_t new_rows = 0;
  for (int64_t id : in.ids) new_rows += !index_.count(id);
  if (rows() + new_rows > options_.max_rows) {
    return ResourceExhausted("table '" + options_.name + "' is full: " + std::to_string(rows()) +
                             " rows and " + std::to_string(new_rows) + " more, over max_rows " +
                             std::to_string(options_.max_rows));
  }
  for (size_t i = 0; i < in.ids.size(); ++i) {
    auto it = index_.find(in.ids[i]);
    if (it == index_.end()) {
      CreateRow(in.ids[i], step);
      it = index_.find(in.ids[i]);
    }
    last_step_[it->second] = step;
    CopyIn(in, static_cast<int64_t>(i), it->second);
  }
  return Status::OK();
}

}  // namespace pstrain::ps
