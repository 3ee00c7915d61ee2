#include "worker/training/evaluation.h"

#include <cmath>

#include "common/binary_metrics.h"
#include "worker/training/input/input_pipeline.h"

namespace pstrain {
namespace worker {

void ClickScores::Add(const Tensor& logits, const std::vector<int32_t>& labels) {
  CHECK_EQ(logits.dim(1), 2) << "click scores need two classes";
  for (int64_t i = 0; i < logits.dim(0); ++i) {
    const double margin = static_cast<double>(logits[2 * i + 1]) - logits[2 * i];
    probabilities_.push_back(1.0 / (1.0 + std::exp(-margin)));
    labels_.push_back(labels[i]);
  }
}

double ClickScores::Auc() const {
  Result<double> auc = RocAuc(probabilities_, labels_);
  return auc.ok() ? *auc : -1.0;
}

double ClickScores::LogLoss() const { return pstrain::LogLoss(probabilities_, labels_); }

Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed) {
  ASSIGN_OR_RETURN(auto pipeline, InputPipeline::Create(input.ForEvaluation(), 1000, 0, 1, seed));
  Evaluation e;
  double loss_sum = 0;
  int64_t correct = 0;
  ClickScores scores;
  for (;;) {
    Result<Batch> batch = pipeline->Next();
    if (batch.status().code() == StatusCode::kOutOfRange) break;
    if (!batch.ok()) return batch.status().WithContext("evaluation input");
    const int64_t n = batch->images.dim(0);
    loss_sum += model->Forward(batch->images, batch->labels, false, nullptr) * n;
    correct += model->CountCorrect(batch->labels);
    if (model->num_classes() == 2) scores.Add(model->logits(), batch->labels);
    e.examples += n;
  }
  if (e.examples == 0) return FailedPrecondition("the evaluation set is empty");
  e.accuracy = static_cast<double>(correct) / e.examples;
  e.loss = loss_sum / e.examples;
  if (model->num_classes() == 2) {
    e.auc = scores.Auc();
    e.log_loss = scores.LogLoss();
  }
  return e;
}

}  // namespace worker
}  // namespace pstrain
