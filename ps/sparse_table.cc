#include "ps/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "ps/denormals.h"

namespace pstrain::ps {
namespace {

// SplitMix64: a row's random stream from (seed, id) alone, cheap to start per row.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1) from the stream's next value.
double NextUnit(uint64_t* state) {
  *state = Mix(*state);
  return (static_cast<double>(*state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

void InitializeRow(const RowInitializer& init, uint64_t seed, int64_t id, int64_t n, float* row) {
  uint64_t state = Mix(seed ^ Mix(static_cast<uint64_t>(id)));
  for (int64_t i = 0; i < n; ++i) {
    switch (init.kind) {
      case RowInitializer::Kind::kZeros:
        row[i] = 0.0f;
        break;
      case RowInitializer::Kind::kUniform:
        row[i] = static_cast<float>((2.0 * NextUnit(&state) - 1.0) * init.scale);
        break;
      case RowInitializer::Kind::kNormal: {  // Box-Muller
        const double u1 = NextUnit(&state), u2 = NextUnit(&state);
        row[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                    std::cos(6.283185307179586 * u2) * init.scale);
        break;
      }
    }
  }
}

Status NegativeId(const std::string& table, size_t position, int64_t id) {
  return InvalidArgument("table '" + table + "': id " + std::to_string(id) + " at position " +
                         std::to_string(position) + " is negative (ids are >= 0)");
}

}  // namespace

Result<SparseTableOptions> SparseTableOptions::FromConfig(const ConfigNode& node) {
  RETURN_IF_ERROR(node.CheckKeys(
      {"name", "dimension", "max_rows", "min_count", "evict_after_steps", "initializer", "seed"}));
  SparseTableOptions o;
  ASSIGN_OR_RETURN(o.name, node.GetString("name"));
  ASSIGN_OR_RETURN(o.dimension, node.GetInt("dimension"));
  ASSIGN_OR_RETURN(o.max_rows, node.GetInt("max_rows"));
  ASSIGN_OR_RETURN(o.min_count, node.GetInt("min_count", o.min_count));
  ASSIGN_OR_RETURN(o.evict_after_steps, node.GetInt("evict_after_steps", o.evict_after_steps));
  ASSIGN_OR_RETURN(int64_t seed, node.GetInt("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  if (node.Has("initializer")) {
    ASSIGN_OR_RETURN(ConfigNode init, node.Child("initializer"));
    RETURN_IF_ERROR(init.CheckKeys({"type", "scale"}));
    ASSIGN_OR_RETURN(std::string type, init.GetString("type"));
    if (type == "zeros") {
      o.initializer.kind = RowInitializer::Kind::kZeros;
    } else if (type == "uniform") {
      o.initializer.kind = RowInitializer::Kind::kUniform;
    } else if (type == "normal") {
      o.initializer.kind = RowInitializer::Kind::kNormal;
    } else {
      return init.Error("field 'type' must be zeros, uniform or normal, got '" + type + "'");
    }
    ASSIGN_OR_RETURN(double scale, init.GetDouble("scale", o.initializer.scale));
    if (!(scale >= 0.0 && std::isfinite(scale))) {
      return init.Error("field 'scale' must be a finite number >= 0, got " + std::to_string(scale));
    }
    o.initializer.scale = static_cast<float>(scale);
  }
  Status valid = o.Validate();
  if (!valid.ok()) return node.Error(valid.message());
  return o;
}

Status SparseTableOptions::Validate() const {
  const std::string who = "table '" + name + "': ";
  if (name.empty()) return InvalidArgument("field 'name' must not be empty");
  if (dimension <= 0) {
    return InvalidArgument(who + "field 'dimension' must be > 0, got " + std::to_string(dimension));
  }
  if (max_rows <= 0) {
    return InvalidArgument(who + "field 'max_rows' must be > 0, got " + std::to_string(max_rows));
  }
  if (min_count < 1) {
    return InvalidArgument(who + "field 'min_count' must be >= 1, got " +
                           std::to_string(min_count));
  }
  if (evict_after_steps < 0) {
    return InvalidArgument(who + "field 'evict_after_steps' must be >= 0, got " +
                           std::to_string(evict_after_steps));
  }
  return Status::OK();
}

SparseTable::SparseTable(SparseTableOptions options, std::shared_ptr<const Optimizer> optimizer,
                         LearningRateSchedule learning_rate, ClippingOptions clipping)
    : options_(std::move(options)),
      optimizer_(std::move(optimizer)),
      learning_rate_(std::move(learning_rate)),
      clipping_(clipping.ServerSide()) {
  CHECK(optimizer_ != nullptr);
  CHECK(options_.Validate().ok()) << options_.Validate().ToString();
  const Slots initial = optimizer_->CreateSlots(Shape{1});
  for (const std::string& slot : optimizer_->slot_names()) {
    slot_initial_.push_back(initial.at(slot)[0]);
  }
  num_slots_ = static_cast<int>(slot_initial_.size());
}

bool SparseTable::Admits(int64_t id, int64_t repeats_in_batch) const {
  auto it = pending_.find(id);
  const int64_t seen = it == pending_.end() ? 0 : it->second.count;
  return seen + repeats_in_batch >= options_.min_count;
}

void SparseTable::CountPending(int64_t id, int64_t step) {
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    if (static_cast<int64_t>(pending_.size()) >= options_.max_rows) return;  // full: not counted
    it = pending_.emplace(id, Pending{}).first;
  }
  ++it->second.count;
  it->second.last_step = step;
}

void SparseTable::CreateRow(int64_t id, int64_t step) {
  int64_t r;
  if (!free_.empty()) {
    r = free_.back();
    free_.pop_back();
  } else {
    r = static_cast<int64_t>(row_ids_.size());
    row_ids_.push_back(-1);
    last_step_.push_back(0);
    storage_.resize(storage_.size() + Stride());
  }
  row_ids_[r] = id;
  last_step_[r] = step;
  index_.emplace(id, r);
  pending_.erase(id);
  float* row = RowAt(r);
  InitializeRow(options_.initializer, options_.seed, id, options_.dimension, row);
  for (int s = 0; s < num_slots_; ++s) {
    float* slot = row + (1 + s) * options_.dimension;
    std::fill(slot, slot + options_.dimension, slot_initial_[s]);
  }
}

Result<Tensor> SparseTable::Gather(const std::vector<int64_t>& ids, int64_t step) {
  std::unordered_map<int64_t, int64_t> repeats;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) return NegativeId(options_.name, i, ids[i]);
    ++repeats[ids[i]];
  }
  int64_t new_rows = 0;
  for (const auto& [id, n] : repeats) new_rows += !index_.count(id) && Admits(id, n);
  if (rows() + new_rows > options_.max_rows) {
    return ResourceExhausted("table '" + options_.name + "' is full: " + std::to_string(rows()) +
                             " rows and this batch adds " + std::to_string(new_rows) +
                             ", over max_rows " + std::to_string(options_.max_rows));
  }
  for (const auto& [id, n] : repeats) {
    auto it = index_.find(id);
    if (it != index_.end()) {
      last_step_[it->second] = step;
    } else if (Admits(id, n)) {
      CreateRow(id, step);
    } else {
      for (int64_t k = 0; k < n; ++k) CountPending(id, step);
    }
  }
  return Lookup(ids);
}

Tensor SparseTable::Lookup(const std::vector<int64_t>& ids) const {
  const int64_t d = options_.dimension;
  Tensor out(Shape{static_cast<int64_t>(ids.size()), d});  // zeros for ids without a row
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = index_.find(ids[i]);
    if (it == index_.end()) continue;
    const float* row = RowAt(it->second);
    std::copy(row, row + d, out.data() + static_cast<int64_t>(i) * d);
  }
  return out;
}

Status SparseTable::CheckGradients(const std::vector<int64_t>& ids, const Tensor& grads) const {
  const Shape want{static_cast<int64_t>(ids.size()), options_.dimension};
  if (grads.empty() ? !ids.empty() : grads.shape() != want) {
    return InvalidArgument("table '" + options_.name + "': gradient has shape " +
                           (grads.empty() ? "(empty)" : grads.shape().ToString()) + ", expected " +
                           want.ToString() + " (one row per id)");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) return NegativeId(options_.name, i, ids[i]);
  }
  for (int64_t i = 0; i < grads.size(); ++i) {
    if (!std::isfinite(grads[i])) {
      return InvalidArgument("table '" + options_.name + "': gradient of id " +
                             std::to_string(ids[i / options_.dimension]) + " is not finite");
    }
  }
  return Status::OK();
}

Status SparseTable::Apply(const std::vector<int64_t>& ids, const Tensor& grads, int64_t step) {
  RETURN_IF_ERROR(CheckGradients(ids, grads));
  const int64_t d = options_.dimension;
  // The rows of each id that has a row, summed, in first-seen order.
  std::unordered_map<int64_t, int64_t> position;
  std::vector<int64_t> rows;
  std::vector<float> summed;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto row = index_.find(ids[i]);
    if (row == index_.end()) continue;
    auto [it, added] = position.emplace(ids[i], static_cast<int64_t>(rows.size()));
    if (added) {
      rows.push_back(row->second);
      summed.resize(summed.size() + d, 0.0f);
    }
    float* into = summed.data() + it->second * d;
    const float* g = grads.data() + static_cast<int64_t>(i) * d;
    for (int64_t k = 0; k < d; ++k) into[k] += g[k];
  }
  if (rows.empty()) return Status::OK();
  Tensor grad = Tensor::FromVector(Shape{static_cast<int64_t>(rows.size()), d}, summed);
  const float bound = optimizer_->gradient_bound();
  for (int64_t i = 0; i < grad.size(); ++i) {
    if (!(std::fabs(grad[i]) <= bound)) {
      return InvalidArgument("table '" + options_.name + "': summed gradient " +
                             std::to_string(grad[i]) + " is beyond the " + optimizer_->name() +
                             " optimizer's bound " + std::to_string(bound));
    }
  }
  if (clipping_.by_value) ClipByValue(clipping_.by_value->first, clipping_.by_value->second, &grad);
  if (clipping_.by_norm) ClipByNorm(*clipping_.by_norm, &grad);
  const float lr = learning_rate_.At(step);
  FlushDenormalsOnThisThreadsTeam();
  std::vector<float*> slots(num_slots_);
  for (size_t j = 0; j < rows.size(); ++j) {
    float* row = RowAt(rows[j]);
    for (int s = 0; s < num_slots_; ++s) slots[s] = row + (1 + s) * d;
    optimizer_->UpdateRow(lr, step, d, grad.data() + static_cast<int64_t>(j) * d, row,
                          slots.data());
    last_step_[rows[j]] = step;
  }
  return Status::OK();
}

int64_t SparseTable::Evict(int64_t step) {
  const int64_t n = options_.evict_after_steps;
  if (n == 0) return 0;
  int64_t evicted = 0;
  for (int64_t r = 0; r < static_cast<int64_t>(row_ids_.size()); ++r) {
    if (row_ids_[r] < 0 || step - last_step_[r] < n) continue;
    index_.erase(row_ids_[r]);
    row_ids_[r] = -1;
    free_.push_back(r);
    ++evicted;
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = step - it->second.last_step >= n ? pending_.erase(it) : std::next(it);
  }
  return evicted;
}

const float* SparseTable::Row(int64_t id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : RowAt(it->second);
}

void SparseTable::FirstTouchRow(int64_t id, float* out) const {
  InitializeRow(options_.initializer, options_.seed, id, options_.dimension, out);
}

const float* SparseTable::Slot(int64_t id, int slot) const {
  const float* row = Row(id);
  if (row == nullptr || slot < 0 || slot >= num_slots_) return nullptr;
  return row + (1 + slot) * options_.dimension;
}

}  // namespace pstrain::ps
