// The device halves of Model: activations and gradients in device memory, the batch uploaded
// through the context's pinned staging buffer, the losses and logits downloaded the same way.
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/model.h"

namespace pstrain {
namespace worker {

void Model::AllocateGpu(int64_t batch) {
  batch_ = batch;
  outputs_.clear();
  grads_.clear();
  int64_t largest = 0;
  const std::string who = "model '" + name_ + "' batch " + std::to_string(batch);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::vector<int64_t> dims{batch};
    dims.insert(dims.end(), n.shape.dims().begin(), n.shape.dims().end());
    const std::string what = who + ": " + layers_[i]->name();
    outputs_.push_back(gpu_->NewTensorOrDie(Shape(dims), what + " output"));
    grads_.push_back(n.needs_grad || i + 1 == nodes_.size()
                         ? gpu_->NewTensorOrDie(Shape(dims), what + " gradient")
                         : Tensor());
    largest = std::max(largest, outputs_.back().size());
  }
  scratch_grad_ = gpu_->NewTensorOrDie(Shape{largest}, who + ": gradient scratch");
  std::vector<int64_t> image_dims{batch};
  image_dims.insert(image_dims.end(), input_shape_.dims().begin(), input_shape_.dims().end());
  device_images_ = gpu_->NewTensorOrDie(Shape(image_dims), who + ": images");
  static_assert(sizeof(int32_t) == sizeof(float), "labels are stored in a float tensor");
  device_labels_ = gpu_->NewTensorOrDie(Shape{batch}, who + ": labels");
  host_losses_ = Tensor::Uninitialized(Shape{batch});
  host_logits_ = Tensor::Uninitialized(Shape{batch, num_classes_});
}

void Model::UploadBatchGpu(const Tensor& images, const std::vector<int32_t>& labels) {
  // The CPU loss layer checks the labels as it reads them; on the GPU they are checked here.
  for (size_t i = 0; i < labels.size(); ++i) {
    CHECK(labels[i] >= 0 && labels[i] < num_classes_)
        << "model '" << name_ << "': label " << labels[i] << " of example " << i
        << " is outside [0, " << num_classes_ << ")";
  }
  CHECK_EQ(images.size(), device_images_.size()) << "upload of " << images.shape().ToString();
  // Images and labels in one staging round: the second would wait for the first's copy.
  gpu_->UploadStaged({{images.data(), {device_images_.data(), images.bytes()}},
                      {labels.data(), {device_labels_.data(), labels.size() * sizeof(int32_t)}}});
  input_ = &device_images_;
  ctx_.gpu = gpu_;
  ctx_.device_labels = reinterpret_cast<const int32_t*>(device_labels_.data());
}

float Model::FinishForwardGpu() {
  gpu_->Download(
      {{&outputs_.back(), &host_losses_}, {&outputs_[nodes_.back().inputs[0]], &host_logits_}});
  double sum = 0.0;
  for (int64_t i = 0; i < batch_; ++i) sum += host_losses_[i];
  return static_cast<float>(sum / batch_);
}

void Model::FillLossGradientGpu(float value) {
  cuda::Fill(grads_.back().data(), grads_.back().size(), value, gpu_->stream());
}

void Model::AccumulateGpu(const Tensor& src, Tensor* dst) {
  cuda::AddInPlace(src.data(), dst->data(), dst->size(), gpu_->stream());
}

}  // namespace worker
}  // namespace pstrain
