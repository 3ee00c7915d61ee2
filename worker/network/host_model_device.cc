// The host device: tensors in host memory, layers run their CPU kernels, nothing moves.
#include "worker/network/model_device.h"

namespace pstrain {
namespace worker {
namespace {

class HostModelDevice : public ModelDevice {
 public:
  Device device() const override { return Device::kCpu; }

  Status Place(Layer* layer) override {
    layer->set_device(Device::kCpu);
    for (Variable& v : layer->variables()) v.device_value = v.device_grad = Tensor();
    return Status::OK();
  }
  Tensor NewTensor(const Shape& shape, const std::string&) override {
    return Tensor::Uninitialized(shape);
  }

  const Tensor* UploadBatch(const Tensor& images, const std::vector<int32_t>&, int64_t,
                            LayerContext*) override {
    return &images;  // the loss layer checks the labels as it reads them
  }
  float FinishForward(const Tensor& losses, const Tensor&) override {
    double sum = 0.0;
    const int64_t n = losses.size();
    for (int64_t i = 0; i < n; ++i) sum += losses[i];
    return static_cast<float>(sum / n);
  }
  const Tensor& HostLogits(const Tensor& logits) const override { return logits; }

  void Fill(Tensor* t, float value) override { t->Fill(value); }
  void Accumulate(const Tensor& src, Tensor* dst) override {
    float* d = dst->data();
    const float* s = src.data();
    const int64_t m = dst->size();
#pragma omp parallel for simd schedule(static)
    for (int64_t j = 0; j < m; ++j) d[j] += s[j];
  }

  void UploadValues(const std::vector<Variable*>&) override {}
  void DownloadGradients(const std::vector<std::unique_ptr<Layer>>&) override {}
  void DownloadLayerGradientsAsync(const std::vector<std::unique_ptr<Layer>>&, int) override {}
  void Synchronize() override {}
  std::function<Status()> Fence() override { return nullptr; }
};

}  // namespace

std::unique_ptr<ModelDevice> NewHostModelDevice() { return std::make_unique<HostModelDevice>(); }

}  // namespace worker
}  // namespace pstrain
