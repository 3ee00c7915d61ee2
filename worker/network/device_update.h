// The optimizer's update where the model computes: on a GPU the variables, their gradients and
// the optimizer's slots stay in device memory and kernels apply the same element-wise rule as
// ps::Optimizer (as TensorFlow places a single process's variables on its GPU), instead of
// gradients to the host, the update there and the values back every step. The single-process
// trainer and the GPU benchmark use it; a worker of a cluster pushes to its servers instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "ps/optimizer.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

namespace cuda {
class GpuContext;
}

// A trainable variable and its slots in host memory (ps::Optimizer::slot_names() order): where
// the device's slots start from, and where DownloadState writes them back.
struct UpdatedVariable {
  Variable* variable = nullptr;
  std::vector<Tensor> slots;
};

class DeviceUpdate {
 public:
  virtual ~DeviceUpdate() = default;
  // Updates every variable's device value from its device gradient at learning rate `lr`;
  // `step` counts the updates before this one (Adam's bias correction). A step whose gradients
  // hold NaN or Inf is refused before anything changes, naming the first such variable.
  virtual Status Apply(float lr, int64_t step) = 0;
  // Device -> host: every variable's value (trainable or not: batch-norm statistics), the
  // trainable ones' last gradients, and the slots, for a checkpoint, histograms or the export.
  virtual void DownloadState() = 0;
};

// OK when `rule` has device kernels (sgd, momentum, adam, adagrad, rmsprop); else why not.
Status DeviceUpdateSupports(const ps::OptimizerRule& rule);

// The update of the trainable `variables` (placed on the GPU already) on `gpu`, their slots
// uploaded from the host values given; `all_variables`, the model's every variable, are what
// DownloadState copies back. In a build without the CUDA backend, FailedPrecondition.
Result<std::unique_ptr<DeviceUpdate>> NewGpuUpdate(cuda::GpuContext* gpu,
                                                   const ps::OptimizerRule& rule,
                                                   std::vector<UpdatedVariable> variables,
                                                   const std::vector<Variable*>& all_variables);

}  // namespace worker
}  // namespace pstrain
