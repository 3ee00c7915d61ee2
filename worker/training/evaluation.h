// Accuracy and loss over the whole test set, in evaluation mode (the trainer, the chief at the
// end, the evaluator role), and for a two-class model (a click model) the ROC AUC of class 1.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "worker/network/model.h"
#include "worker/training/input/input_options.h"

namespace pstrain {
namespace worker {

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
  int64_t examples = 0;
  double auc = -1;  // two classes only: the ROC AUC of class 1's probability; else -1
  double log_loss = -1;  // two classes only: the log loss of class 1's probability; else -1
};

// Class 1's softmax probabilities of two-class logits, batch by batch, and their AUC.
class ClickScores {
 public:
  // `logits` [N, 2] of the examples labelled `labels`.
  void Add(const Tensor& logits, const std::vector<int32_t>& labels);
  // The ROC AUC (-1 when the labels hold a single class) and the log loss so far.
  double Auc() const;
  double LogLoss() const;

 private:
  std::vector<double> probabilities_;
  std::vector<int32_t> labels_;
};

// A test set's batches summed into an Evaluation: Add after each evaluation-mode Forward.
class EvaluationTally {
 public:
  // The last Forward's batch of `labels.size()` examples, whose mean loss was `mean_loss`.
  void Add(const Model& model, float mean_loss, const std::vector<int32_t>& labels);
  // FailedPrecondition when no example was added.
  Result<Evaluation> Finish() const;

 private:
  Evaluation sums_;  // examples counted; loss summed over examples
  int64_t correct_ = 0;
  bool two_classes_ = false;
  ClickScores scores_;
};

// Accuracy and mean loss of the model (in evaluation mode) over the whole test set.
Result<Evaluation> Evaluate(Model* model, const InputOptions& input, uint64_t seed);

}  // namespace worker
}  // namespace pstrain
