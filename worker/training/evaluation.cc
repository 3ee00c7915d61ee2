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

void EvaluationTally::Add(const Model& model, float mean_loss, const std::vector<int32_t>& labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  sums_.loss += static_cast<double>(mean_loss) * n;
  sums_.examples += n;
  correct_ += model.CountCorrect(labels);
  two_classes_ = model.num_classes() == 2;
  if (two_classes_) scores_.Add(model.logits(), labels);
}

Result<Evaluation> EvaluationTally::Finish() const {
  if (sums_.examples == 0) return FailedPrecondition("the evaluation set is empty");
  Evaluation e = sums_;
  e.accuracy = static_cast<double>(correct_) / e.examples;
  e.loss = sums_.loss / e.examples;
  if (two_classes_) {
    e.auc = scores_.Auc();
    e.log_loss = scores_.LogLoss();
  }
  return e;
}

Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed) {
  ASSIGN_OR_RETURN(auto pipeline, InputPipeline::Create(input.ForEvaluation(), 1000, 0, 1, seed));
  EvaluationTally tally;
  for (;;) {
    Result<Batch> batch = pipeline->Next();
    if (batch.status().code() == StatusCode::kOutOfRange) break;
    if (!batch.ok()) return batch.status().WithContext("evaluation input");
    tally.Add(*model, model->Forward(batch->images, batch->labels, false, nullptr), batch->labels);
  }
  return tally.Finish();
}

}  // namespace worker
}  // namespace pstrain
