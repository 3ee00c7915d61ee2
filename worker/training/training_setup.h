// What single-process training and a distributed worker share: the `train:` and `input:` config
// sections, the test-set evaluation and the gradient preparation (weight decay, global norm).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "common/summary/summary_writer.h"
#include "ps/clipping.h"
#include "worker/network/device_placement.h"
#include "worker/training/input/input_options.h"
#include "worker/network/model.h"

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

// Loss, steps and examples since the last progress line, and the rates over that time.
class ProgressWindow {
 public:
  using Clock = std::chrono::steady_clock;
  struct Report {
    int64_t steps = 0;
    double mean_loss = 0, examples_per_sec = 0, steps_per_sec = 0;
  };
  void Add(float loss, int64_t examples) {
    loss_ += loss;
    ++steps_;
    examples_ += examples;
  }
  // Time spent elsewhere (evaluation) is not training time: keep it out of the rates.
  void Exclude(Clock::duration d) { start_ += d; }
  // The window's figures; starts the next window.
  Report Take();

 private:
  Clock::time_point start_ = Clock::now();
  int64_t steps_ = 0, examples_ = 0;
  double loss_ = 0;
};

// The scalars every trainer writes for a progress window: loss, learning rate, examples/s and
// global_step/sec.
void WriteProgressScalars(SummaryWriter* log, int64_t step, float learning_rate,
                          const ProgressWindow::Report& report);

// On a GPU: logs the allocator's statistics (in use, peak, reserved, regions) and, when `log`
// is given, writes them as TensorBoard scalars under gpu_memory/. Nothing on the CPU.
void ReportDeviceMemory(const ComputeDevice& device, const std::string& who, int64_t step,
                        SummaryWriter* log);

}  // namespace worker
}  // namespace pstrain
