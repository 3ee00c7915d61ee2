// NewGpuModelDevice in a build without the CUDA backend (no CUDA compiler, cuDNN or cuBLAS).
#include "worker/network/model_device.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<ModelDevice>> NewGpuModelDevice(cuda::GpuContext*,
                                                       const std::string& model_name) {
  return FailedPrecondition("model '" + model_name +
                            "': this binary was built without the CUDA backend");
}

}  // namespace worker
}  // namespace pstrain
