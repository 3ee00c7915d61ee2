#include "worker/training/image_input.h"

#include "common/summary/summary_writer.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<ImageInput>> ImageInput::Create(const InputOptions& input,
                                                       int64_t batch_size, uint64_t seed,
                                                       int64_t first_step,
                                                       SummaryWriter* first_images) {
  // The shuffle continues from where a resumed run stopped rather than repeating its start.
  ASSIGN_OR_RETURN(auto pipeline,
                   InputPipeline::Create(input, batch_size, 0, 1, seed + first_step));
  return std::unique_ptr<ImageInput>(
      new ImageInput(std::move(pipeline), input, seed, first_step == 0 ? first_images : nullptr));
}

Result<TrainingInput::Pass> ImageInput::ForwardBackward(Model* model, int64_t step,
                                                        std::mt19937_64* rng) {
  Result<Batch> batch = next_ ? std::move(*next_) : pipeline_->Next();
  next_.reset();
  if (!batch.ok()) return batch.status().WithContext("training input");
  if (first_images_ != nullptr) {
    first_images_->AddImages("input", step, batch->images, 3);
    first_images_ = nullptr;
  }
  Pass pass;
  pass.loss = model->Forward(batch->images, batch->labels, true, rng);
  pass.examples = batch->images.dim(0);
  // On the GPU each layer's gradients start for the host as soon as backward has them.
  model->Backward([&](int layer) { model->DownloadLayerGradientsAsync(layer); });
  if (model->device() == Device::kGpu) {
    // The next batch to the device while backward's kernels run, not after them.
    next_ = pipeline_->Next();
    if (next_->ok()) model->PrefetchInput((*next_)->images, (*next_)->labels);
  }
  model->DownloadGradients();  // on the GPU: gradients and batch-norm statistics to the host
  return pass;
}

Result<Evaluation> ImageInput::Evaluate(Model* model, int64_t) {
  return worker::Evaluate(model, input_, seed_);
}

}  // namespace worker
}  // namespace pstrain
