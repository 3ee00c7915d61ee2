// Gradient clipping with TensorFlow 1.x's semantics (tf.clip_by_value, tf.clip_by_norm,
// tf.clip_by_global_norm). Norms are summed in double, on many threads for big tensors.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain::ps {

// Clips every element of `grad` to [min_value, max_value] (min_value <= max_value).
void ClipByValue(float min_value, float max_value, Tensor* grad);

// The sum of the squares of the elements, accumulated in double.
double SumOfSquares(const Tensor& t);

// Scales `grad` by clip_norm / max(norm, clip_norm), so its L2 norm is at most clip_norm
// (clip_norm > 0); a gradient already within the norm is left bit-for-bit unchanged.
// Returns the norm before clipping.
double ClipByNorm(float clip_norm, Tensor* grad);

// The factor tf.clip_by_global_norm scales every gradient by: clip_norm / global_norm when
// that is below 1, else 1; NaN when global_norm is not finite (TF poisons such a step
// rather than apply it silently). Parameter servers holding shards sum SumOfSquares over
// all shards, take the square root, and scale their shard by this factor.
double GlobalNormScale(double global_norm, double clip_norm);

// Multiplies every element of `t` by `factor`.
void Scale(float factor, Tensor* t);

// tf.clip_by_global_norm over one step's gradients: global_norm = sqrt(sum of all squares)
// and each gradient is scaled by GlobalNormScale(global_norm, clip_norm). Null or empty
// entries (variables that got no gradient) are skipped. Returns the global norm before
// clipping.
double ClipByGlobalNorm(float clip_norm, const std::vector<Tensor*>& grads);

// The `clipping:` config node; every method is optional:
//   clipping:
//     by_value: [-1.0, 1.0]   # min < max
//     by_norm: 5.0            # > 0, per tensor
//     by_global_norm: 5.0     # > 0, over all gradients of a step
struct ClippingOptions {
  std::optional<std::pair<float, float>> by_value;  // [min, max]
  std::optional<float> by_norm;
  std::optional<float> by_global_norm;

  static Result<ClippingOptions> FromConfig(const ConfigNode& clipping_node);
  // Checks min < max and positive norms; errors name the field.
  Status Validate() const;
  bool enabled() const { return by_value || by_norm || by_global_norm; }

  // Which side applies what, decided here once. by_global_norm needs every gradient of a
  // step, which only the worker that computed them (or its host's leader, after the host
  // average) holds: workers apply it before they push. by_value and by_norm are per tensor:
  // each server applies them to the gradient it is about to apply, after accumulation. The
  // single-process trainer does the same in the same order: global norm, then per tensor.
  ClippingOptions WorkerSide() const;  // by_global_norm only
  ClippingOptions ServerSide() const;  // by_value and by_norm only
};

}  // namespace pstrain::ps
