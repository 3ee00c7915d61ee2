// The CUDA device of a model: activations and gradients in device memory from the context's
// allocator, the batch uploaded through its pinned staging buffer, the losses and logits
// downloaded the same way, and each layer's gradients copied to the host on the copy stream as
// backward finishes them.
#include <algorithm>

#include "worker/network/cuda/batch_prefetch.h"
#include "worker/network/cuda/device_mirrors.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"
#include "worker/network/model_device.h"

namespace pstrain {
namespace worker {
namespace {

std::vector<Variable*> VariablesOf(Layer* layer) {
  std::vector<Variable*> vars;
  for (Variable& v : layer->variables()) vars.push_back(&v);
  return vars;
}

class GpuModelDevice : public ModelDevice {
 public:
  GpuModelDevice(cuda::GpuContext* gpu, std::string model_name)
      : gpu_(gpu), model_name_(std::move(model_name)) {}

  Device device() const override { return Device::kGpu; }

  Status Place(Layer* layer) override { return cuda::MirrorOnGpu(layer, gpu_); }
  Tensor NewTensor(const Shape& shape, const std::string& what) override {
    return gpu_->NewTensorOrDie(shape, what);
  }

  const Tensor* UploadBatch(const Tensor& images, const std::vector<int32_t>& labels,
                            int64_t num_classes, LayerContext* ctx) override {
    // The CPU loss layer checks the labels as it reads them; on the GPU they are checked here.
    for (size_t i = 0; i < labels.size(); ++i) {
      CHECK(labels[i] >= 0 && labels[i] < num_classes)
          << "model '" << model_name_ << "': label " << labels[i] << " of example " << i
          << " is outside [0, " << num_classes << ")";
    }
    const int64_t batch = images.dim(0);
    if (batch != batch_) {
      const std::string who = "model '" + model_name_ + "' batch " + std::to_string(batch);
      device_images_ = gpu_->NewTensorOrDie(images.shape(), who + ": images");
      static_assert(sizeof(int32_t) == sizeof(float), "labels are stored in a float tensor");
      device_labels_ = gpu_->NewTensorOrDie(Shape{batch}, who + ": labels");
      host_losses_ = Tensor::Uninitialized(Shape{batch});
      host_logits_ = Tensor::Uninitialized(Shape{batch, num_classes});
      batch_ = batch;
    }
    ctx->gpu = gpu_;
    ctx->device_labels = reinterpret_cast<const int32_t*>(device_labels_.data());
    if (prefetch_ && prefetch_->Take(images, labels, &device_images_, &device_labels_)) {
      ctx->device_labels = reinterpret_cast<const int32_t*>(device_labels_.data());
      return &device_images_;
    }
    // Images and labels in one staging round: the second would wait for the first's copy.
    gpu_->UploadStaged({{images.data(), {device_images_.data(), images.bytes()}},
                        {labels.data(), {device_labels_.data(), labels.size() * sizeof(int32_t)}}});
    return &device_images_;
  }
  void PrefetchBatch(const Tensor& images, const std::vector<int32_t>& labels) override {
    if (!prefetch_) prefetch_ = std::make_unique<cuda::BatchPrefetch>(gpu_);
    prefetch_->Start(images, labels, "model '" + model_name_ + "'");
  }
  float FinishForward(const Tensor& losses, const Tensor& logits) override {
    gpu_->Download({{&losses, &host_losses_}, {&logits, &host_logits_}});
    double sum = 0.0;
    for (int64_t i = 0; i < batch_; ++i) sum += host_losses_[i];
    return static_cast<float>(sum / batch_);
  }
  const Tensor& HostLogits(const Tensor&) const override { return host_logits_; }

  void Fill(Tensor* t, float value) override {
    cuda::Fill(t->data(), t->size(), value, gpu_->stream());
  }
  void Accumulate(const Tensor& src, Tensor* dst) override {
    cuda::AddInPlace(src.data(), dst->data(), dst->size(), gpu_->stream());
  }

  void UploadValues(const std::vector<Variable*>& variables) override {
    cuda::UploadValues(variables, gpu_);
  }
  void DownloadGradients(const std::vector<std::unique_ptr<Layer>>& layers) override {
    if (!gpu_->async_download_open()) {
      std::vector<Variable*> all;
      for (const auto& l : layers) {
        for (Variable* v : VariablesOf(l.get())) all.push_back(v);
      }
      return cuda::DownloadToHost(all, false, gpu_);
    }
    // Layers backward skipped (or that never reported) are copied now.
    for (size_t i = 0; i < layers.size(); ++i) {
      if (!downloading_[i]) DownloadLayerGradientsAsync(layers, static_cast<int>(i));
    }
    gpu_->FinishAsyncDownload();
    downloading_.clear();
  }
  void DownloadLayerGradientsAsync(const std::vector<std::unique_ptr<Layer>>& layers,
                                   int index) override {
    if (!gpu_->async_download_open()) {
      size_t bytes = 0;
      for (const auto& l : layers) {
        for (const auto& [device, host] : cuda::GradientCopies(VariablesOf(l.get()))) {
          bytes += (host->bytes() + 255) / 256 * 256;
        }
      }
      gpu_->BeginAsyncDownload(bytes);
      downloading_.assign(layers.size(), false);
    }
    CHECK(!downloading_.at(index)) << "layer " << index << "'s gradients downloaded twice";
    downloading_[index] = true;
    for (const auto& [device, host] : cuda::GradientCopies(VariablesOf(layers[index].get()))) {
      gpu_->DownloadAsync(device, host);
    }
  }
  void Synchronize() override { gpu_->Synchronize(); }
  std::function<Status()> Fence() override { return gpu_->Fence(); }

 private:
  cuda::GpuContext* gpu_;
  std::string model_name_;
  int64_t batch_ = -1;
  // The batch in device memory (labels as int32 bits in a float tensor, the one tensor type)
  // and the host copies of the losses and logits.
  Tensor device_images_, device_labels_, host_losses_, host_logits_;
  std::unique_ptr<cuda::BatchPrefetch> prefetch_;  // made by the first PrefetchBatch
  std::vector<bool> downloading_;  // layers whose gradients are being copied this step
};

}  // namespace

Result<std::unique_ptr<ModelDevice>> NewGpuModelDevice(cuda::GpuContext* gpu,
                                                       const std::string& model_name) {
  CHECK(gpu != nullptr) << "Model::SetDevice(kGpu) needs a GPU context";
  return std::unique_ptr<ModelDevice>(new GpuModelDevice(gpu, model_name));
}

}  // namespace worker
}  // namespace pstrain
