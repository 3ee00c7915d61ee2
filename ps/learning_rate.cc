#include "ps/learning_rate.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

namespace pstrain::ps {
namespace {

std::string Number(double value) {
  std::ostringstream s;
  s << value;
  return s.str();
}

Status CheckLearningRate(const char* field, double value) {
  // Updates run in float32: a rate beyond its range would turn into infinity there.
  if (value >= 0.0 && value <= std::numeric_limits<float>::max()) return Status::OK();
  return InvalidArgument(std::string("field '") + field +
                         "' must be a learning rate from 0 to 3.4e38 (float32), got " +
                         Number(value));
}

Status AtNode(const ConfigNode& node, const Status& status) {
  return status.ok() ? status : node.Error(status.message());
}

}  // namespace

Result<LearningRateSchedule> LearningRateSchedule::Constant(double lr) {
  RETURN_IF_ERROR(CheckLearningRate("initial", lr));
  LearningRateSchedule s;
  s.kind_ = Kind::kConstant;
  s.initial_ = lr;
  return s;
}

Result<LearningRateSchedule> LearningRateSchedule::ExponentialDecay(double initial,
                                                                    int64_t decay_steps,
                                                                    double decay_rate,
                                                                    bool staircase) {
  RETURN_IF_ERROR(CheckLearningRate("initial", initial));
  if (decay_steps <= 0) {
    return InvalidArgument("field 'decay_steps' must be > 0, got " + std::to_string(decay_steps));
  }
  if (!(decay_rate > 0.0 && std::isfinite(decay_rate))) {
    return InvalidArgument("field 'decay_rate' must be > 0, got " + Number(decay_rate));
  }
  LearningRateSchedule s;
  s.kind_ = Kind::kExponentialDecay;
  s.initial_ = initial;
  s.decay_steps_ = decay_steps;
  s.decay_rate_ = decay_rate;
  s.staircase_ = staircase;
  return s;
}

Result<LearningRateSchedule> LearningRateSchedule::PiecewiseConstant(
    std::vector<int64_t> boundaries, std::vector<double> values) {
  if (values.size() != boundaries.size() + 1) {
    return InvalidArgument("field 'values' must have one more entry than 'boundaries' (" +
                           std::to_string(boundaries.size() + 1) + "), got " +
                           std::to_string(values.size()));
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      return InvalidArgument("field 'boundaries' must strictly increase, got " +
                             std::to_string(boundaries[i - 1]) + " then " +
                             std::to_string(boundaries[i]));
    }
  }
  for (double v : values) RETURN_IF_ERROR(CheckLearningRate("values", v));
  LearningRateSchedule s;
  s.kind_ = Kind::kPiecewiseConstant;
  s.boundaries_ = std::move(boundaries);
  s.values_ = std::move(values);
  return s;
}

Result<LearningRateSchedule> LearningRateSchedule::FromConfig(const ConfigNode& node) {
  if (!node.IsMap()) return node.Error("expected a map with a 'schedule' field");
  ASSIGN_OR_RETURN(std::string schedule, node.GetString("schedule", "constant"));
  if (schedule == "constant") {
    RETURN_IF_ERROR(node.CheckKeys({"schedule", "initial"}));
    ASSIGN_OR_RETURN(double initial, node.GetDouble("initial"));
    auto s = Constant(initial);
    if (!s.ok()) return AtNode(node, s.status());
    return s;
  }
  if (schedule == "exponential_decay") {
    RETURN_IF_ERROR(
        node.CheckKeys({"schedule", "initial", "decay_steps", "decay_rate", "staircase"}));
    ASSIGN_OR_RETURN(double initial, node.GetDouble("initial"));
    ASSIGN_OR_RETURN(int64_t decay_steps, node.GetInt("decay_steps"));
    ASSIGN_OR_RETURN(double decay_rate, node.GetDouble("decay_rate"));
    ASSIGN_OR_RETURN(bool staircase, node.GetBool("staircase", false));
    auto s = ExponentialDecay(initial, decay_steps, decay_rate, staircase);
    if (!s.ok()) return AtNode(node, s.status());
    return s;
  }
  if (schedule == "piecewise_constant") {
    RETURN_IF_ERROR(node.CheckKeys({"schedule", "boundaries", "values"}));
    ASSIGN_OR_RETURN(std::vector<int64_t> boundaries, node.GetIntList("boundaries"));
    ASSIGN_OR_RETURN(std::vector<double> values, node.GetDoubleList("values"));
    auto s = PiecewiseConstant(std::move(boundaries), std::move(values));
    if (!s.ok()) return AtNode(node, s.status());
    return s;
  }
  return node.Error("unknown learning-rate schedule '" + schedule +
                    "' (known: constant, exponential_decay, piecewise_constant)");
}

float LearningRateSchedule::At(int64_t global_step) const {
  switch (kind_) {
    case Kind::kConstant:
      return static_cast<float>(initial_);
    case Kind::kExponentialDecay: {
      double exponent = static_cast<double>(global_step) / static_cast<double>(decay_steps_);
      if (staircase_) exponent = std::floor(exponent);
      return static_cast<float>(initial_ * std::pow(decay_rate_, exponent));
    }
    case Kind::kPiecewiseConstant: {
      size_t i = 0;
      while (i < boundaries_.size() && global_step > boundaries_[i]) ++i;
      return static_cast<float>(values_[i]);
    }
  }
  return 0.0f;  // Unreachable: every kind returns above.
}

}  // namespace pstrain::ps
