// Optimizers that update one variable from its gradient, with TensorFlow 1.x's formulas.
// An optimizer holds only its hyper-parameters; all per-variable state lives in named slot
// tensors owned by the caller, so a checkpoint can store them as "<var>/<slot>" and a
// restored run continues exactly. Step-dependent terms (Adam's bias correction) come from
// the global step the caller passes in, never from hidden counters.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain::ps {

// Per-variable optimizer state by slot name ("m", "v", "accumulator", ...).
using Slots = std::map<std::string, Tensor>;

struct OptimizerRule;

class Optimizer {
 public:
  // Reads the `optimizer:` node: `type` (sgd | momentum | adam | adagrad | rmsprop | ftrl) and the
  // hyper-parameters of that type. Unknown types, unknown fields and bad values are errors.
  static Result<std::unique_ptr<Optimizer>> FromConfig(const ConfigNode& optimizer_node);
  // The types FromConfig knows, in alphabetical order (as errors list them).
  static std::vector<std::string> KnownTypes();
  // Optimizers register themselves as layers do (PSTRAIN_REGISTER_OPTIMIZER below), so adding
  // one touches no central file; CHECKs that `type` is new.
  using FromConfigFn = Result<std::unique_ptr<Optimizer>> (*)(const ConfigNode&);
  static bool Register(const std::string& type, FromConfigFn from_config);

  virtual ~Optimizer() = default;

  // The config `type` of this optimizer ("adam").
  virtual const char* name() const = 0;
  // The slots Apply needs, in a fixed order; empty for SGD.
  virtual std::vector<std::string> slot_names() const = 0;
  // Its type and hyper-parameters, for code that runs the same element-wise rule elsewhere (the
  // GPU's update kernels, worker/network/device_update.h).
  OptimizerRule rule() const;

  // The largest |gradient element| one update may take without this optimizer's state or the
  // variable overflowing float32. Optimizers that square the gradient (Adam, Adagrad, FTRL,
  // RMSProp: optimizers/optimizer_base.h, SquaringOptimizerWith) bound it by
  // kSquaredGradientBound; the others by finiteness alone. The server refuses a push beyond it,
  // changing nothing.
  virtual float gradient_bound() const;
  // 2^60: its square, 2^120, leaves 2^8 of headroom under float32's 2^128 for the moving
  // averages and sums of squares that hold it.
  static constexpr float kSquaredGradientBound = 1152921504606846976.0f;

  // Slots for a variable of `shape`, holding their initial values (e.g. Adagrad's 0.1).
  Slots CreateSlots(const Shape& shape) const;
  // Refills this optimizer's slots in place with their initial values; the shapes stay.
  void ResetSlots(Slots* slots) const;
  // OK when `slots` holds every slot this optimizer needs with shape `var_shape` (slots it
  // does not use are ignored); otherwise names the missing or mis-shaped slot.
  Status CheckSlots(const Shape& var_shape, const Slots& slots) const;

  // One update of `var` from `grad` at learning rate `lr`. `global_step` counts the updates
  // applied before this one (0 for the first). Fails, changing nothing, when shapes differ
  // or a slot is missing.
  Status Apply(float lr, int64_t global_step, const Tensor& grad, Tensor* var, Slots* slots) const;
  // The same update with the new values written to `out` (shaped as `var`; may be `var`'s own
  // buffer) and `var` left as it was: bitwise what Apply would have left in `var`, in the same
  // single pass. The server updates a variable this way while a pull reply still holds its
  // buffer, instead of copying the whole variable first.
  Status ApplyInto(float lr, int64_t global_step, const Tensor& grad, const Tensor& var,
                   Tensor* out, Slots* slots) const;
  // The same update in place over `n` raw floats whose sizes the caller has checked: one row of
  // a sparse table (ps/sparse_table.h), whose rows and slots are not Tensors of their own.
  // `slots` points at the slot rows in slot_names() order. The caller flushes denormals.
  void UpdateRow(float lr, int64_t global_step, int64_t n, const float* grad, float* var,
                 float* const* slots) const {
    Update(lr, global_step, n, grad, var, var, slots);
  }

 protected:
  // The value a fresh slot is filled with (0 unless overridden).
  virtual float InitialSlotValue(const std::string& slot) const;
  // Writes this optimizer's options into its field of `rule` (none for SGD).
  virtual void DescribeOptions(OptimizerRule* /*rule*/) const {}
  // The element-wise update over `n` elements after all checks passed: reads `var`, writes
  // `out` (the same buffer for an update in place, never overlapping it otherwise). `slots`
  // points at the slot buffers in slot_names() order, updated in place.
  virtual void Update(float lr, int64_t global_step, int64_t n, const float* grad, const float* var,
                      float* out, float* const* slots) const = 0;
};

// tf.train.MomentumOptimizer: accum = momentum * accum + g; var -= lr * accum, or with
// use_nesterov var -= lr * g + lr * momentum * accum. Slot "momentum".
struct MomentumOptions {
  float momentum = 0.9f;  // in [0, 1)
  bool nesterov = false;
};

// tf.train.AdamOptimizer: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t) with t = step + 1,
// m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2, var -= lr_t m / (sqrt(v) + eps).
// Slots "m", "v".
struct AdamOptions {
  float beta1 = 0.9f;     // in [0, 1)
  float beta2 = 0.999f;   // in [0, 1)
  float epsilon = 1e-8f;  // >= 0, outside the sqrt
};
// Adam's bias-corrected step size lr_t after `global_step` updates, computed in double as TF
// keeps beta^t (shared by the host's rule and the GPU's).
inline float AdamStepSize(const AdamOptions& o, float lr, int64_t global_step) {
  const double t = static_cast<double>(global_step) + 1.0;
  const double beta1_power = std::pow(static_cast<double>(o.beta1), t);
  const double beta2_power = std::pow(static_cast<double>(o.beta2), t);
  return static_cast<float>(lr * std::sqrt(1.0 - beta2_power) / (1.0 - beta1_power));
}

// tf.train.AdagradOptimizer: accum += g^2; var -= lr * g / sqrt(accum). Slot "accumulator".
struct AdagradOptions {
  float initial_accumulator_value = 0.1f;  // > 0
};

// tf.train.RMSPropOptimizer: ms = decay ms + (1 - decay) g^2 (centered: also
// mg = decay mg + (1 - decay) g and ms - mg^2 replaces ms); mom = momentum mom +
// lr g / sqrt(ms + eps); var -= mom. Slots "ms" (starts at 1, as in TF 1.x), "mom", and
// "mg" when centered.
struct RMSPropOptions {
  float decay = 0.9f;      // in [0, 1)
  float momentum = 0.0f;   // in [0, 1)
  float epsilon = 1e-10f;  // >= 0, inside the sqrt
  bool centered = false;
};

// tf.train.FtrlOptimizer (l2_shrinkage 0): accum_new = accum + g^2;
// linear += g - (accum_new^-p - accum^-p) / lr * var with p = learning_rate_power;
// var = |linear| > l1 ? (sign(linear) l1 - linear) / (accum_new^-p / lr + 2 l2) : 0.
// Slots "accumulator" (starts at initial_accumulator_value) and "linear".
struct FtrlOptions {
  float learning_rate_power = -0.5f;        // <= 0
  float initial_accumulator_value = 0.1f;   // > 0
  float l1_regularization_strength = 0.0f;  // >= 0
  float l2_regularization_strength = 0.0f;  // >= 0
};

// An optimizer's type (its config `type`) and the options of that type; the other fields keep
// their defaults.
struct OptimizerRule {
  std::string type;
  MomentumOptions momentum;
  AdamOptions adam;
  AdagradOptions adagrad;
  RMSPropOptions rmsprop;
  FtrlOptions ftrl;
};

// Constructors for code that builds optimizers without a config (the errors name the field).
std::unique_ptr<Optimizer> NewSgdOptimizer();
Result<std::unique_ptr<Optimizer>> NewMomentumOptimizer(const MomentumOptions& options);
Result<std::unique_ptr<Optimizer>> NewAdamOptimizer(const AdamOptions& options);
Result<std::unique_ptr<Optimizer>> NewAdagradOptimizer(const AdagradOptions& options);
Result<std::unique_ptr<Optimizer>> NewRMSPropOptimizer(const RMSPropOptions& options);
Result<std::unique_ptr<Optimizer>> NewFtrlOptimizer(const FtrlOptions& options);

// In optimizers/<name>.cc: PSTRAIN_REGISTER_OPTIMIZER("adam", <its reader of a config node>);
#define PSTRAIN_REGISTER_OPTIMIZER(type_name, from_config)            \
  static const bool PSTRAIN_CONCAT(kRegisteredOptimizer_, __LINE__) = \
      ::pstrain::ps::Optimizer::Register(type_name, from_config)

}  // namespace pstrain::ps
