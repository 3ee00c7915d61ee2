// What one-process training (trainer.h) needs from a model's kind of data, so one loop trains
// both: an image model reads batches from the input pipeline and every variable is dense
// (image_input.h); a click model reads click-log Examples by feature name and its embedding
// layers' rows live in sparse tables, gathered before a step and updated after it
// (click_input.h). The loop itself owns the dense store, progress, evaluation's schedule,
// TensorBoard, checkpoints and stopping.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "worker/network/model.h"
#include "worker/training/evaluation.h"

namespace pstrain {
class SummaryWriter;
namespace worker {

class TrainingInput {
 public:
  virtual ~TrainingInput() = default;

  virtual int64_t examples_per_epoch() const = 0;
  // Forward and backward on the next training batch at global step `step`: the batch's mean loss
  // and its number of examples. Errors name the input (a corrupt file, a table over its rows).
  struct Pass {
    float loss = 0;
    int64_t examples = 0;
  };
  virtual Result<Pass> ForwardBackward(Model* model, int64_t step, std::mt19937_64* rng) = 0;
  // Whether `v` is updated by this input (after the step) rather than by the dense store.
  virtual bool Holds(const Variable* v) const = 0;
  // After the dense variables took step `step`'s gradients: the input's own updates.
  virtual Status AfterUpdate(int64_t step) = 0;
  // The model in evaluation mode over the whole test set at global step `step`.
  virtual Result<Evaluation> Evaluate(Model* model, int64_t step) = 0;
  // The input's own state into a checkpoint's tensors (a click model's tables), and back from a
  // restored one at global step `step`; nothing for an image model.
  virtual void SaveTo(std::map<std::string, Tensor>* tensors) const = 0;
  virtual Status RestoreFrom(const std::map<std::string, Tensor>& tensors, int64_t step) = 0;
  // Text for progress lines beyond the loop's own ("" for none), e.g. the tables' rows.
  virtual std::string Progress() const = 0;
  // What the run writes into `train_dir` at its end beyond the dense variables (a click model:
  // its ONNX export, the one place its tables leave the process); OK when nothing.
  virtual Status WriteFinal(const ConfigNode& model_node, Model* model,
                            const std::string& train_dir) = 0;
};

}  // namespace worker
}  // namespace pstrain
