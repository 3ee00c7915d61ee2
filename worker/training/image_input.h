// Image models' data for one-process training (training_input.h): batches from the input pipeline
// (input/input_pipeline.h), every variable dense, the test set scored by Evaluate.
#pragma once

#include <memory>
#include <optional>

#include "worker/training/input/input_pipeline.h"
#include "worker/training/training_input.h"

namespace pstrain {
namespace worker {

class ImageInput : public TrainingInput {
 public:
  // `first_images`, when given, receives the first batch's images (TensorBoard's Images tab).
  static Result<std::unique_ptr<ImageInput>> Create(const InputOptions& input, int64_t batch_size,
                                                    uint64_t seed, int64_t first_step,
                                                    SummaryWriter* first_images);

  int64_t examples_per_epoch() const override { return pipeline_->examples_per_epoch(); }
  Result<Pass> ForwardBackward(Model* model, int64_t step, std::mt19937_64* rng) override;
  bool Holds(const Variable*) const override { return false; }
  Status AfterUpdate(int64_t) override { return Status::OK(); }
  Result<Evaluation> Evaluate(Model* model, int64_t step) override;
  void SaveTo(std::map<std::string, Tensor>*) const override {}
  Status RestoreFrom(const std::map<std::string, Tensor>&, int64_t) override {
    return Status::OK();
  }
  std::string Progress() const override { return ""; }
  // Nothing: pstrain-export writes an image model's ONNX from its checkpoints.
  Status WriteFinal(const ConfigNode&, Model*, const std::string&) override { return Status::OK(); }

 private:
  ImageInput(std::unique_ptr<InputPipeline> pipeline, InputOptions input, uint64_t seed,
             SummaryWriter* first_images)
      : pipeline_(std::move(pipeline)),
        input_(std::move(input)),
        seed_(seed),
        first_images_(first_images) {}

  std::unique_ptr<InputPipeline> pipeline_;
  InputOptions input_;
  uint64_t seed_;
  SummaryWriter* first_images_;  // null once written, or when not wanted
  // On a GPU, the next step's batch, drawn while this step's backward runs and already on its
  // way to the device (Model::PrefetchInput); its error, if drawing it failed.
  std::optional<Result<Batch>> next_;
};

}  // namespace worker
}  // namespace pstrain
