// Accuracy and loss over the whole test set, in evaluation mode (the trainer, the chief at the
// end, the evaluator role).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "worker/network/model.h"
#include "worker/training/input/input_options.h"

namespace pstrain {
namespace worker {

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
  int64_t examples = 0;
};
// Accuracy and mean loss of the model (in evaluation mode) over the whole test set.
Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed);

}  // namespace worker
}  // namespace pstrain
