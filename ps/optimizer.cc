#include "ps/optimizer.h"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "ps/denormals.h"
#include "ps/optimizers/optimizers.h"

namespace pstrain::ps {
namespace {

// Type name -> reader, filled by PSTRAIN_REGISTER_OPTIMIZER in each optimizers/<name>.cc.
std::map<std::string, Optimizer::FromConfigFn>& Registry() {
  static auto* registry = new std::map<std::string, Optimizer::FromConfigFn>();
  return *registry;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

bool Optimizer::Register(const std::string& type, FromConfigFn from_config) {
  CHECK(Registry().emplace(type, from_config).second)
      << "optimizer type '" << type << "' registered twice";
  return true;
}

std::vector<std::string> Optimizer::KnownTypes() {
  std::vector<std::string> types;
  for (const auto& entry : Registry()) types.push_back(entry.first);
  return types;
}

Result<std::unique_ptr<Optimizer>> Optimizer::FromConfig(const ConfigNode& optimizer_node) {
  if (!optimizer_node.IsMap()) return optimizer_node.Error("expected a map with a 'type' field");
  ASSIGN_OR_RETURN(std::string type, optimizer_node.GetString("type"));
  for (const auto& [known, from_config] : Registry()) {
    if (type == known) return from_config(optimizer_node);
  }
  return optimizer_node.Error("unknown optimizer type '" + type +
                              "' (known: " + Join(KnownTypes()) + ")");
}

float Optimizer::InitialSlotValue(const std::string& /*slot*/) const { return 0.0f; }

OptimizerRule Optimizer::rule() const {
  OptimizerRule rule;
  rule.type = name();
  DescribeOptions(&rule);
  return rule;
}

Slots Optimizer::CreateSlots(const Shape& shape) const {
  Slots slots;
  for (const std::string& slot : slot_names()) {
    slots.emplace(slot, Tensor::Filled(shape, InitialSlotValue(slot)));
  }
  return slots;
}

void Optimizer::ResetSlots(Slots* slots) const {
  CHECK(slots != nullptr);
  for (const std::string& slot : slot_names()) {
    auto it = slots->find(slot);
    if (it != slots->end() && !it->second.empty()) it->second.Fill(InitialSlotValue(slot));
  }
}

Status Optimizer::CheckSlots(const Shape& var_shape, const Slots& slots) const {
  for (const std::string& slot : slot_names()) {
    auto it = slots.find(slot);
    if (it == slots.end() || it->second.empty()) {
      return FailedPrecondition(std::string(name()) + " optimizer: slot '" + slot +
                                "' is missing (expected shape " + var_shape.ToString() + ")");
    }
    if (it->second.shape() != var_shape) {
      return InvalidArgument(std::string(name()) + " optimizer: slot '" + slot + "' has shape " +
                             it->second.shape().ToString() + " but the variable has shape " +
                             var_shape.ToString());
    }
  }
  return Status::OK();
}

Status Optimizer::Apply(float lr, int64_t global_step, const Tensor& grad, Tensor* var,
                        Slots* slots) const {
  CHECK(var != nullptr);
  return ApplyInto(lr, global_step, grad, *var, var, slots);
}

Status Optimizer::ApplyInto(float lr, int64_t global_step, const Tensor& grad, const Tensor& var,
                            Tensor* out, Slots* slots) const {
  CHECK(out != nullptr && slots != nullptr);
  if (var.empty()) return InvalidArgument(std::string(name()) + " optimizer: variable is empty");
  if (grad.empty()) return InvalidArgument(std::string(name()) + " optimizer: gradient is empty");
  if (grad.shape() != var.shape()) {
    return InvalidArgument(std::string(name()) + " optimizer: gradient has shape " +
                           grad.shape().ToString() + " but the variable has shape " +
                           var.shape().ToString());
  }
  if (out->empty() || out->shape() != var.shape()) {
    return InvalidArgument(std::string(name()) + " optimizer: the output has shape " +
                           (out->empty() ? "(empty)" : out->shape().ToString()) +
                           " but the variable has shape " + var.shape().ToString());
  }
  const float* in_begin = var.data();
  const float* out_begin = out->data();
  if (out_begin != in_begin && out_begin < in_begin + var.size() &&
      in_begin < out_begin + var.size()) {
    return InvalidArgument(std::string(name()) +
                           " optimizer: the output overlaps the variable without being it "
                           "(expected the same buffer or a separate one)");
  }
  if (global_step < 0) {
    return InvalidArgument(std::string(name()) + " optimizer: global_step must be >= 0, got " +
                           std::to_string(global_step));
  }
  RETURN_IF_ERROR(CheckSlots(var.shape(), *slots));
  std::vector<float*> slot_data;
  for (const std::string& slot : slot_names()) slot_data.push_back(slots->at(slot).data());
  FlushDenormalsOnThisThreadsTeam();  // subnormal moments would slow the update 10-60x
  Update(lr, global_step, var.size(), grad.data(), var.data(), out->data(), slot_data.data());
  return Status::OK();
}

namespace internal {
namespace {

std::string Number(double value) {
  std::ostringstream s;
  s << value;
  return s.str();
}

}  // namespace

Status CheckInUnitInterval(const char* field, double value) {
  if (value >= 0.0 && value < 1.0) return Status::OK();
  return InvalidArgument(std::string("field '") + field + "' must be in [0, 1), got " +
                         Number(value));
}

Status CheckNonNegative(const char* field, double value) {
  if (value >= 0.0 && std::isfinite(value)) return Status::OK();
  return InvalidArgument(std::string("field '") + field + "' must be >= 0, got " + Number(value));
}

Status CheckPositive(const char* field, double value) {
  if (value > 0.0 && std::isfinite(value)) return Status::OK();
  return InvalidArgument(std::string("field '") + field + "' must be > 0, got " + Number(value));
}

Status CheckNonPositive(const char* field, double value) {
  if (value <= 0.0) return Status::OK();
  return InvalidArgument(std::string("field '") + field + "' must be <= 0, got " + Number(value));
}

Status CheckBound(const char* field, double value, Bound bound) {
  switch (bound) {
    case Bound::kUnitInterval:
      return CheckInUnitInterval(field, value);
    case Bound::kNonNegative:
      return CheckNonNegative(field, value);
    case Bound::kPositive:
      return CheckPositive(field, value);
    case Bound::kNonPositive:
      return CheckNonPositive(field, value);
  }
  return Internal(std::string("field '") + field + "': unknown bound");
}

Result<float> GetFloat(const ConfigNode& node, const std::string& key, float fallback) {
  ASSIGN_OR_RETURN(double value, node.GetDouble(key, fallback));
  return static_cast<float>(value);
}

Status AtNode(const ConfigNode& node, const Status& status) {
  if (status.ok()) return status;
  return node.Error(status.message());
}

}  // namespace internal
float Optimizer::gradient_bound() const { return std::numeric_limits<float>::max(); }

}  // namespace pstrain::ps
