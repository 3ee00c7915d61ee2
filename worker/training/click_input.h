// Click models' data for one-process training (training_input.h), such as Wide & Deep
// (configs/widedeep.yaml): the whole click log (click_data.h), and the embedding layers' rows in
// sparse tables (embedding_tables.h) gathered before each step and updated after the dense
// variables; evaluation reports accuracy, loss, ROC AUC and log loss on the test file.
//
//   input: {...}            # click_data.h
//   tables: {...}           # embedding_tables.h
#pragma once

#include <memory>

#include "common/config.h"
#include "worker/training/click_data.h"
#include "worker/training/embedding_tables.h"
#include "worker/training/training_input.h"

namespace pstrain {
namespace worker {

class ClickInput : public TrainingInput {
 public:
  // Reads the config's `input` and `tables` sections for `model` (whose variables are
  // initialised); `data_dir`, when not empty, prefixes the TFRecord paths. Errors name the field,
  // feature, record or table.
  static Result<std::unique_ptr<ClickInput>> Create(const ConfigNode& config, Model* model,
                                                    int64_t batch_size, uint64_t seed,
                                                    const std::string& data_dir,
                                                    int64_t max_table_rows);

  int64_t examples_per_epoch() const override { return data_.train_examples(); }
  Result<Pass> ForwardBackward(Model* model, int64_t step, std::mt19937_64* rng) override;
  bool Holds(const Variable* v) const override { return tables_->Holds(v); }
  Status AfterUpdate(int64_t step) override;
  Result<Evaluation> Evaluate(Model* model, int64_t step) override;
  void SaveTo(std::map<std::string, Tensor>* tensors) const override { tables_->SaveTo(tensors); }
  Status RestoreFrom(const std::map<std::string, Tensor>& tensors, int64_t step) override {
    return tables_->RestoreFrom(tensors, step);
  }
  std::string Progress() const override { return "tables: " + tables_->Summary(); }
  // <train_dir>/model.onnx with the tables whole over their hash buckets (onnx_table_rows.h),
  // unless the start found it cannot be written (and said why).
  Status WriteFinal(const ConfigNode& model_node, Model* model,
                    const std::string& train_dir) override;

 private:
  ClickInput(ClickData data, int64_t batch_size)
      : data_(std::move(data)), batch_size_(batch_size) {}

  ClickData data_;
  int64_t batch_size_;
  std::string onnx_blocker_;  // why no model.onnx will be written ("" when it will)
  std::unique_ptr<EmbeddingTables> tables_;
  FeatureBatch batch_;  // the step's batch, until AfterUpdate applied its rows
};

}  // namespace worker
}  // namespace pstrain
