// Initial values for weights, chosen per layer by the config's `init` field.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "common/tensor.h"

namespace pstrain {
namespace worker {

enum class Init { kGlorotUniform, kHeNormal };

// The fields of every layer with weights and an optional bias (fully_connected and the
// convolutions): `use_bias` (true unless given) and `init` (glorot_uniform unless given).
Status ReadWeightFields(const ConfigNode& node, bool* use_bias, Init* init);
void InitWeights(Init init, int64_t fan_in, int64_t fan_out, std::mt19937_64* rng, Tensor* w);

}  // namespace worker
}  // namespace pstrain
