// Where a model's layers run, as Model sees it: memory for a batch's activations and gradients,
// the batch in, the losses and logits out, the variables and gradients between host and device,
// and waiting for queued work. The host device (the CPU) moves nothing; the CUDA device
// (cuda/gpu_model_device.cc) copies through its GpuContext. Model itself has no device-specific
// code: which implementation exists is decided by the build (CMake compiles
// cuda/gpu_model_device.cc or model_device_without_cuda.cc), not by #if.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class ModelDevice {
 public:
  virtual ~ModelDevice() = default;
  virtual Device device() const = 0;

  // Puts one layer on this device: its variables' device mirrors (uploaded from the host
  // values) on a GPU, none on the CPU.
  virtual Status Place(Layer* layer) = 0;
  // An activation or gradient tensor; `what` names it in an out-of-memory error.
  virtual Tensor NewTensor(const Shape& shape, const std::string& what) = 0;

  // The batch where the first layer reads it; sets the context's device fields. Labels must be
  // in [0, num_classes).
  virtual const Tensor* UploadBatch(const Tensor& images, const std::vector<int32_t>& labels,
                                    int64_t num_classes, LayerContext* ctx) = 0;
  // Starts moving the batch that a later UploadBatch of the same host tensor and labels will
  // want to where it reads it, while queued work runs (a GPU's BatchPrefetch); nothing on the
  // CPU, which reads the host tensor itself.
  virtual void PrefetchBatch(const Tensor& /*images*/, const std::vector<int32_t>& /*labels*/) {}
  // After the forward pass: the mean of `losses` [N], with `logits` [N, classes] copied to the
  // host where HostLogits finds them.
  virtual float FinishForward(const Tensor& losses, const Tensor& logits) = 0;
  // The last forward pass's logits in host memory (`logits` itself on the CPU).
  virtual const Tensor& HostLogits(const Tensor& logits) const = 0;

  virtual void Fill(Tensor* t, float value) = 0;
  // dst += src
  virtual void Accumulate(const Tensor& src, Tensor* dst) = 0;

  // Host values -> device mirrors, after they changed on the host.
  virtual void UploadValues(const std::vector<Variable*>& variables) = 0;
  // Device -> host: trainable variables' gradients, other variables' values; finishes what
  // DownloadLayerGradientsAsync started.
  virtual void DownloadGradients(const std::vector<std::unique_ptr<Layer>>& layers) = 0;
  // Starts copying layer `index`'s gradients while backward goes on.
  virtual void DownloadLayerGradientsAsync(const std::vector<std::unique_ptr<Layer>>& layers,
                                           int index) = 0;
  // Waits until the device has finished the work queued so far.
  virtual void Synchronize() = 0;
  // A function that waits for the work queued so far; empty where there is nothing to wait for.
  virtual std::function<Status()> Fence() = 0;
};

// The CPU: tensors in host memory, nothing to copy or wait for.
std::unique_ptr<ModelDevice> NewHostModelDevice();

namespace cuda {
class GpuContext;
}
// The GPU of `gpu` (not null). In a build without the CUDA backend, FailedPrecondition naming
// the model.
Result<std::unique_ptr<ModelDevice>> NewGpuModelDevice(cuda::GpuContext* gpu,
                                                       const std::string& model_name);

}  // namespace worker
}  // namespace pstrain
