// Initial values for weights, chosen per layer by the config's `init` field.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "common/config.h"
#include "common/tensor.h"

namespace pstrain {
namespace worker {

enum class Init { kGlorotUniform, kHeNormal };

Result<Init> ReadInit(const ConfigNode& node);
void InitWeights(Init init, int64_t fan_in, int64_t fan_out, std::mt19937_64* rng, Tensor* w);

}  // namespace worker
}  // namespace pstrain
