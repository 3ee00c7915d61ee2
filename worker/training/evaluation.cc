#include "worker/training/evaluation.h"

#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace worker {

Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed) {
  ASSIGN_OR_RETURN(auto pipeline, InputPipeline::Create(input.ForEvaluation(), 1000, 0, 1, seed));
  Evaluation e;
  double loss_sum = 0;
  int64_t correct = 0;
  for (;;) {
    Result<Batch> batch = pipeline->Next();
    if (batch.status().code() == StatusCode::kOutOfRange) break;
    if (!batch.ok()) return batch.status().WithContext("evaluation input");
    const int64_t n = batch->images.dim(0);
    loss_sum += model->Forward(batch->images, batch->labels, false, nullptr) * n;
    correct += model->CountCorrect(batch->labels);
    e.examples += n;
  }
  if (e.examples == 0) return FailedPrecondition("the evaluation set is empty");
  e.accuracy = static_cast<double>(correct) / e.examples;
  e.loss = loss_sum / e.examples;
  return e;
}

}  // namespace worker
}  // namespace pstrain
