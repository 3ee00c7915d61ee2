// DeviceUpdate on a GPU: the slots in device memory beside the variables' mirrors, one finiteness
// check over every gradient before any variable changes, then one update kernel per variable,
// all on the context's compute stream.
#include <algorithm>

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/device_mirrors.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/update_kernels.h"
#include "worker/network/device_update.h"

namespace pstrain {
namespace worker {
namespace {

class GpuUpdate : public DeviceUpdate {
 public:
  GpuUpdate(cuda::GpuContext* gpu, ps::OptimizerRule rule, std::vector<UpdatedVariable> variables,
            std::vector<Variable*> all_variables)
      : gpu_(gpu),
        rule_(std::move(rule)),
        variables_(std::move(variables)),
        all_variables_(std::move(all_variables)) {}

  Status Init() {
    std::vector<std::pair<const Tensor*, Tensor*>> uploads;
    device_slots_.resize(variables_.size());
    for (size_t i = 0; i < variables_.size(); ++i) {
      UpdatedVariable& u = variables_[i];
      if (u.variable->device_value.empty() || u.variable->device_grad.empty()) {
        return FailedPrecondition("variable '" + u.variable->name + "' is not on the GPU");
      }
      if (u.slots.size() > 3) {
        return InvalidArgument("the " + rule_.type + " optimizer has more than 3 slots");
      }
      device_slots_[i].reserve(u.slots.size());  // the upload list points into it
      for (Tensor& slot : u.slots) {
        if (slot.shape() != u.variable->value.shape()) {
          return InvalidArgument("a slot of '" + u.variable->name + "' is shaped " +
                                 slot.shape().ToString() + ", its variable " +
                                 u.variable->value.shape().ToString());
        }
        Result<Tensor> device = gpu_->NewTensor(slot.shape());
        if (!device.ok()) return device.status().WithContext(u.variable->name + " slot on the GPU");
        device_slots_[i].push_back(std::move(device).value());
        uploads.push_back({&slot, &device_slots_[i].back()});
      }
    }
    gpu_->Upload(uploads);
    ASSIGN_OR_RETURN(flags_, gpu_->Allocate(sizeof(int) * std::max<size_t>(1, variables_.size())));
    host_flags_.assign(variables_.size(), 0);
    return Status::OK();
  }

  Status Apply(float lr, int64_t step) override {
    if (variables_.empty()) return Status::OK();
    const size_t flag_bytes = sizeof(int) * variables_.size();
    PSTRAIN_CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flag_bytes, gpu_->stream()));
    for (size_t i = 0; i < variables_.size(); ++i) {
      const Tensor& grad = variables_[i].variable->device_grad;
      cuda::FlagNonFinite(grad.data(), grad.size(), flags_.as<int>(), static_cast<int>(i),
                          gpu_->stream());
    }
    gpu_->DownloadBytes(flags_.data(), host_flags_.data(), flag_bytes);
    for (size_t i = 0; i < variables_.size(); ++i) {
      if (host_flags_[i] != 0) {
        return InvalidArgument("the gradient of '" + variables_[i].variable->name +
                               "' holds NaN or Inf; no variable was updated");
      }
    }
    for (size_t i = 0; i < variables_.size(); ++i) Launch(lr, step, i);
    return Status::OK();
  }

  void DownloadState() override {
    // What a worker downloads (gradients, batch-norm statistics), the trainable values, then
    // the slots, in one wait.
    std::vector<std::pair<const Tensor*, Tensor*>> copies = cuda::GradientCopies(all_variables_);
    for (Variable* v : all_variables_) {
      if (v->trainable) copies.push_back({&v->device_value, &v->value});
    }
    for (size_t i = 0; i < variables_.size(); ++i) {
      for (size_t k = 0; k < variables_[i].slots.size(); ++k) {
        copies.push_back({&device_slots_[i][k], &variables_[i].slots[k]});
      }
    }
    gpu_->Download(copies);
  }

 private:
  void Launch(float lr, int64_t step, size_t i) {
    Variable* v = variables_[i].variable;
    cuda::UpdateBuffers b{v->device_value.data(), v->device_grad.data(), {}, v->value.size()};
    for (size_t k = 0; k < device_slots_[i].size(); ++k) b.slots[k] = device_slots_[i][k].data();
    cudaStream_t s = gpu_->stream();
    if (rule_.type == "sgd") {
      cuda::Sgd(b, lr, s);
    } else if (rule_.type == "momentum") {
      cuda::Momentum(b, lr, rule_.momentum.momentum, rule_.momentum.nesterov, s);
    } else if (rule_.type == "adam") {
      const float alpha = ps::AdamStepSize(rule_.adam, lr, step);
      cuda::Adam(b, alpha, rule_.adam.beta1, rule_.adam.beta2, rule_.adam.epsilon, s);
    } else if (rule_.type == "adagrad") {
      cuda::Adagrad(b, lr, s);
    } else {
      CHECK_EQ(rule_.type, "rmsprop") << "DeviceUpdateSupports let an unknown rule through";
      cuda::RMSProp(b, lr, rule_.rmsprop.decay, rule_.rmsprop.momentum, rule_.rmsprop.epsilon,
                    rule_.rmsprop.centered, s);
    }
  }

  cuda::GpuContext* gpu_;
  const ps::OptimizerRule rule_;
  std::vector<UpdatedVariable> variables_;  // host slots: where DownloadState writes
  std::vector<Variable*> all_variables_;
  std::vector<std::vector<Tensor>> device_slots_;
  cuda::DeviceBuffer flags_;  // one int per variable: its gradient is not finite
  std::vector<int> host_flags_;
};

}  // namespace

Result<std::unique_ptr<DeviceUpdate>> NewGpuUpdate(cuda::GpuContext* gpu,
                                                   const ps::OptimizerRule& rule,
                                                   std::vector<UpdatedVariable> variables,
                                                   const std::vector<Variable*>& all_variables) {
  CHECK(gpu != nullptr) << "NewGpuUpdate needs a GPU context";
  RETURN_IF_ERROR(DeviceUpdateSupports(rule));
  auto update = std::make_unique<GpuUpdate>(gpu, rule, std::move(variables), all_variables);
  RETURN_IF_ERROR(update->Init());
  return std::unique_ptr<DeviceUpdate>(std::move(update));
}

}  // namespace worker
}  // namespace pstrain
