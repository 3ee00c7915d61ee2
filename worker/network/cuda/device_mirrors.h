// Putting a layer's variables on the GPU: device mirrors from the context's allocator, filled
// from the host values. Model::SetDevice does this for every layer; tests do it for one.
#pragma once

#include "common/status.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/layer.h"

namespace pstrain {
namespace worker {
namespace cuda {

// Checks layer->GpuSupport(), allocates device_value (and device_grad for trainable
// variables), uploads the values and switches the layer to the GPU.
Status MirrorOnGpu(Layer* layer, GpuContext* gpu);
// Host values -> device mirrors.
void UploadValues(const std::vector<Variable*>& variables, GpuContext* gpu);
// Device -> host: gradients of trainable variables, values of the others (batch-norm
// statistics); with all_values, every value too.
void DownloadToHost(const std::vector<Variable*>& variables, bool all_values, GpuContext* gpu);
// What DownloadToHost(variables, false) copies, as (device, host) pairs.
std::vector<std::pair<const Tensor*, Tensor*>> GradientCopies(
    const std::vector<Variable*>& variables);

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
