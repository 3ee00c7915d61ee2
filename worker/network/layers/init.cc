#include "worker/network/layers/init.h"

#include <cmath>

namespace pstrain {
namespace worker {

Status ReadWeightFields(const ConfigNode& node, bool* use_bias, Init* init) {
  ASSIGN_OR_RETURN(*use_bias, node.GetBool("use_bias", true));
  ASSIGN_OR_RETURN(std::string name, node.GetString("init", "glorot_uniform"));
  if (name == "glorot_uniform") {
    *init = Init::kGlorotUniform;
  } else if (name == "he_normal") {
    *init = Init::kHeNormal;
  } else {
    return node.Error("field 'init' must be glorot_uniform or he_normal, got '" + name + "'");
  }
  return Status::OK();
}

void InitWeights(Init init, int64_t fan_in, int64_t fan_out, std::mt19937_64* rng, Tensor* w) {
  float* p = w->data();
  const int64_t n = w->size();
  if (init == Init::kGlorotUniform) {
    const float limit = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
    std::uniform_real_distribution<float> dist(-limit, limit);
    for (int64_t i = 0; i < n; ++i) p[i] = dist(*rng);
  } else {
    // Truncated at two standard deviations, as TF's he_normal.
    const float stddev = std::sqrt(2.0f / static_cast<float>(fan_in)) / 0.87962566f;
    std::normal_distribution<float> dist(0.0f, stddev);
    for (int64_t i = 0; i < n; ++i) {
      float v;
      do v = dist(*rng);
      while (std::fabs(v) > 2 * stddev);
      p[i] = v;
    }
  }
}

}  // namespace worker
}  // namespace pstrain
