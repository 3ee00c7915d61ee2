// NewGpuModelDevice and NewGpuUpdate in a build without the CUDA backend (no CUDA compiler, cuDNN
// or cuBLAS).
#include "worker/network/device_update.h"
#include "worker/network/model_device.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<ModelDevice>> NewGpuModelDevice(cuda::GpuContext*,
                                                       const std::string& model_name) {
  return FailedPrecondition("model '" + model_name +
                            "': this binary was built without the CUDA backend");
}

Result<std::unique_ptr<DeviceUpdate>> NewGpuUpdate(cuda::GpuContext*, const ps::OptimizerRule& rule,
                                                   std::vector<UpdatedVariable>,
                                                   const std::vector<Variable*>&) {
  return FailedPrecondition("the " + rule.type +
                            " update on the GPU: this binary was built without the CUDA backend");
}

}  // namespace worker
}  // namespace pstrain
