// What single-process training and a distributed worker share: the `train:` and `input:` config
// sections, the test-set evaluation and the gradient preparation (weight decay, global norm).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "ps/clipping.h"
#include "worker/input/input_options.h"
#include "worker/model.h"

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

// The `input:` section (defaults when absent), with `data_dir` overriding it when non-empty.
// For IDX input the training set is loaded once and, unless the config gives mean/std, its
// statistics normalise training and evaluation alike.
Result<InputOptions> ReadInputOptions(const ConfigNode& config, const std::string& data_dir);

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
  int64_t examples = 0;
};
// Accuracy and mean loss of the model (in evaluation mode) over the whole test set.
Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed);

// Adds weight decay to the weights' gradients (not biases or batch norm) and clips by global
// norm when the config asks for it: the worker's share of gradient processing.
void PrepareGradients(const TrainConfig& config, Model* model);

}  // namespace worker
}  // namespace pstrain
