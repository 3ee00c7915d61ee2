#include "ps/variable_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "ps/largest_exponent.h"
#include "ps/update_rule.h"

namespace pstrain {
namespace ps {

Result<std::unique_ptr<VariableStore>> VariableStore::FromConfig(const ConfigNode& train) {
  ASSIGN_OR_RETURN(UpdateRule rule, ReadUpdateRule(train));
  auto store = std::make_unique<VariableStore>(std::move(rule.optimizer),
                                               std::move(rule.learning_rate), rule.clipping);
  store->fingerprint_ = "train: " + train.ToYaml();
  return store;
}

VariableStore::VariableStore(std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule,
                             ClippingOptions clipping)
    : optimizer_(std::move(optimizer)),
      schedule_(std::move(schedule)),
      clipping_(clipping.ServerSide()),
      fingerprint_(std::string("optimizer: ") + optimizer_->name()) {}

Status VariableStore::AddVariable(const std::string& name, Tensor value) {
  if (variables_.count(name)) return AlreadyExists("variable '" + name + "' is already held");
  Entry e{value, optimizer_->CreateSlots(value.shape()), Tensor()};
  variables_.emplace(name, std::move(e));
  return Status::OK();
}

namespace {
uint32_t ExponentOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return (bits >> 23) & 0xffu;
}

float LargestElement(const Tensor& t) {
  float top = 0;
  for (int64_t i = 0; i < t.size(); ++i) top = std::max(top, std::fabs(t[i]));
  return top;
}
}  // namespace

Status VariableStore::CheckGradient(const std::string& name, const Tensor& grad,
                                    uint32_t* exponent) const {
  auto it = variables_.find(name);
  if (it == variables_.end()) return NotFound("no variable named '" + name + "'");
  if (grad.shape() != it->second.value.shape()) {
    return InvalidArgument("gradient for '" + name + "' has shape " + grad.shape().ToString() +
                           ", the variable has " + it->second.value.shape().ToString());
  }
  const uint32_t top = LargestExponent(grad);
  if (exponent != nullptr) *exponent = top;
  if (top == 0xffu) {
    return InvalidArgument("gradient for '" + name + "' holds NaN or Inf; nothing applied");
  }
  // A bound that is a power of two: every element of a smaller exponent is below it.
  const float bound = optimizer_->gradient_bound();
  // Only an element in the bound's own binade or above needs a second, exact pass.
  const float largest = top >= ExponentOf(bound) ? LargestElement(grad) : 0.0f;
  if (largest > bound) {
    std::ostringstream why;
    why << "gradient for '" << name << "' has an element of magnitude " << largest << ", above "
        << bound << ", the most that " << optimizer_->name()
        << "'s state holds without overflowing float32; nothing applied";
    return InvalidArgument(why.str());
  }
  return Status::OK();
}

Tensor VariableStore::TakeSpare(Entry* e) {
  Tensor spare = std::move(e->spare);
  if (!spare.empty() && !spare.shared() && spare.shape() == e->value.shape()) return spare;
  return Tensor::Uninitialized(e->value.shape());  // the old one is still being sent: dropped
}

Status VariableStore::ApplyGradientsAt(int64_t step,
                                       const std::vector<std::pair<std::string, Tensor>>& grads,
                                       Checked checked, Holders holders) {
  // Everything is checked before anything changes.
  ASSIGN_OR_RETURN(NamedTensors prepared, PrepareGradients(grads, checked));
  return ApplyPrepared(step, prepared, holders);
}

Result<VariableStore::NamedTensors> VariableStore::PrepareGradients(const NamedTensors& grads,
                                                                    Checked checked) const {
  if (checked == Checked::kNo) {
    for (const auto& [name, grad] : grads) RETURN_IF_ERROR(CheckGradient(name, grad));
  }
  NamedTensors prepared = grads;  // shares the buffers
  if (!clipping_.by_value && !clipping_.by_norm) return prepared;
  for (auto& [name, grad] : prepared) {
    grad = grad.Clone();
    if (clipping_.by_value) {
      ClipByValue(clipping_.by_value->first, clipping_.by_value->second, &grad);
    }
    if (clipping_.by_norm) ClipByNorm(*clipping_.by_norm, &grad);
  }
  return prepared;
}

Status VariableStore::ApplyPrepared(int64_t step, const NamedTensors& prepared, Holders holders) {
  const float lr = schedule_.At(step);
  for (const auto& [name, grad] : prepared) {
    Entry& e = variables_.at(name);
    if (holders == Holders::kKeepTheirBytes) {
      for (auto& [slot, t] : e.slots) {
        if (t.shared()) t = t.Clone();  // a checkpoint being written: once per save
      }
    }
    if (holders == Holders::kSeeUpdates || !e.value.shared()) {
      RETURN_IF_ERROR(optimizer_->Apply(lr, step, grad, &e.value, &e.slots));
      continue;
    }
    Tensor out = TakeSpare(&e);
    RETURN_IF_ERROR(optimizer_->ApplyInto(lr, step, grad, e.value, &out, &e.slots));
    e.spare = std::move(e.value);
    e.value = std::move(out);
  }
  return Status::OK();
}

Status VariableStore::ApplyGradients(const std::vector<std::pair<std::string, Tensor>>& grads) {
  RETURN_IF_ERROR(ApplyGradientsAt(global_step_, grads));
  ++global_step_;
  return Status::OK();
}

void VariableStore::DetachIfShared(const std::string& name) {
  Entry& e = variables_.at(name);
  if (e.value.shared()) e.value = e.value.Clone();
  for (auto& [slot, t] : e.slots) {
    if (t.shared()) t = t.Clone();
  }
}

void VariableStore::Assign(const std::string& name, const Tensor& value) {
  Entry& e = variables_.at(name);
  CHECK_EQ(e.value.size(), value.size()) << "Assign: '" << name << "'";
  if (e.value.shared()) {
    e.value = value.Clone().Reshaped(e.value.shape());
  } else {
    e.value.CopyFrom(value);
  }
}

std::vector<std::string> VariableStore::Names() const {
  std::vector<std::string> names;
  for (const auto& kv : variables_) names.push_back(kv.first);
  return names;
}

std::map<std::string, Tensor> VariableStore::StateTensors() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, e] : variables_) {
    out[name] = e.value;
    for (const auto& [slot, t] : e.slots) out[name + "/" + slot] = t;
  }
  return out;
}

}  // namespace ps
}  // namespace pstrain
