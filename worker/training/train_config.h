// The `train:` and `input:` sections of a config, as single-process training and every
// distributed role read them.
#pragma once

#include <cstdint>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "ps/clipping.h"
#include "worker/training/input/input_options.h"

namespace pstrain {
namespace worker {

struct TrainConfig {
  uint64_t seed = 1;
  int64_t batch_size = 128;
  int64_t epochs = 1;
  int64_t max_steps = 0;
  double weight_decay = 0;
  ps::ClippingOptions clipping;
};

Result<TrainConfig> ReadTrainConfig(const ConfigNode& train);

// The `input:` section (defaults when absent), with `data_dir` overriding it when non-empty
// and the image shape taken from `model.input`.
// For IDX input the training set is loaded once and, unless the config gives mean/std, its
// statistics normalise training and evaluation alike.
Result<InputOptions> ReadInputOptions(const ConfigNode& config, const std::string& data_dir);

}  // namespace worker
}  // namespace pstrain
