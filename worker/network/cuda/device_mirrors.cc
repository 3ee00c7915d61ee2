#include "worker/network/cuda/device_mirrors.h"

namespace pstrain {
namespace worker {
namespace cuda {

Status MirrorOnGpu(Layer* layer, GpuContext* gpu) {
  RETURN_IF_ERROR(layer->GpuSupport());
  std::vector<Variable*> vars;
  for (Variable& v : layer->variables()) {
    Result<Tensor> value = gpu->NewTensor(v.value.shape());
    if (!value.ok()) return value.status().WithContext(v.name + " on the GPU");
    v.device_value = std::move(value).value();
    if (v.trainable) {
      Result<Tensor> grad = gpu->NewTensor(v.value.shape());
      if (!grad.ok()) return grad.status().WithContext(v.name + " gradient on the GPU");
      v.device_grad = std::move(grad).value();
    }
    vars.push_back(&v);
  }
  UploadValues(vars, gpu);
  layer->set_device(Device::kGpu);
  return Status::OK();
}

void UploadValues(const std::vector<Variable*>& variables, GpuContext* gpu) {
  std::vector<std::pair<const Tensor*, Tensor*>> copies;
  for (Variable* v : variables) copies.push_back({&v->value, &v->device_value});
  gpu->Upload(copies);
}

std::vector<std::pair<const Tensor*, Tensor*>> GradientCopies(
    const std::vector<Variable*>& variables) {
  std::vector<std::pair<const Tensor*, Tensor*>> copies;
  for (Variable* v : variables) {
    if (v->trainable) {
      copies.push_back({&v->device_grad, &v->grad});
    } else {
      copies.push_back({&v->device_value, &v->value});
    }
  }
  return copies;
}

void DownloadToHost(const std::vector<Variable*>& variables, bool all_values, GpuContext* gpu) {
  std::vector<std::pair<const Tensor*, Tensor*>> copies = GradientCopies(variables);
  if (all_values) {
    for (Variable* v : variables) {
      if (v->trainable) copies.push_back({&v->device_value, &v->value});
    }
  }
  gpu->Download(copies);
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
