// Where a worker computes, chosen once at start from TensorFlow-style flags: --device=auto|cpu|gpu
// (auto: the GPU when one is visible), --allow_soft_placement (no visible GPU: the CPU with a
// warning, or, when false, an error), --log_device_placement, --gpu_allow_growth and
// --gpu_memory_fraction. The GPUs are those CUDA_VISIBLE_DEVICES leaves visible; a worker uses
// the first of them.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/network/layer.h"
#include "worker/network/model.h"

namespace pstrain {

struct AllocatorStats;

namespace worker {

struct DeviceOptions {
  std::string device = "auto";
  bool log_device_placement = false;
  bool allow_soft_placement = true;
  bool gpu_allow_growth = true;
  double gpu_memory_fraction = 1.0;
  bool cudnn_autotune = true;              // time cuDNN's convolution algorithms per shape
  bool cudnn_deterministic = false;        // only algorithms that repeat bit for bit
  bool allow_tf32 = false;                 // TF32 tensor cores in convolutions and matrix products
  int64_t cudnn_workspace_limit_mb = 512;  // the most scratch one convolution algorithm may use
  bool cudnn_graph = true;  // convolutions through cuDNN's graph API's engines where they run
  int cudnn_graph_candidates = 8;    // graph engine configs timed per convolution direction
  double cudnn_graph_margin = 0.1;   // how much faster than the legacy algorithm one must be
};

// Errors name the flag and the expected values.
Status ValidateDeviceOptions(const DeviceOptions& options);

// Whether this binary has the CUDA layer backend.
bool GpuBackendBuilt();

struct DeviceChoice {
  Device device = Device::kCpu;
  std::string warning;  // non-empty when a GPU was wanted and the CPU was chosen instead
};
// The decision alone, so that it is tested without a GPU: `visible_gpus` is how many GPUs the
// CUDA runtime sees (or why it cannot tell), `cuda_visible_devices` the variable's value (null
// when unset), for messages.
Result<DeviceChoice> ChooseDevice(const DeviceOptions& options, const Result<int>& visible_gpus,
                                  bool gpu_backend_built, const char* cuda_visible_devices);

// "CUDA_VISIBLE_DEVICES=\"1,2\"" or "CUDA_VISIBLE_DEVICES unset".
std::string CudaVisibleDevicesText(const char* value);

// The chosen device, with the GPU context when it is the GPU.
class ComputeDevice {
 public:
  // Probes the GPUs, chooses, logs the choice (and with log_device_placement every visible
  // GPU's name, memory and compute capability) and creates the GPU context.
  static Result<std::unique_ptr<ComputeDevice>> Open(const DeviceOptions& options,
                                                     const std::string& who);
  // A CPU device without probing anything (tests, tools).
  static std::unique_ptr<ComputeDevice> Cpu();

  Device device() const { return device_; }
  cuda::GpuContext* gpu() const { return gpu_.get(); }
  // One line for the logs: the device and how it computes.
  std::string Description() const;
  // Puts the model on this device (Model::SetDevice) and, with log_device_placement, logs
  // the device of every layer.
  Status Place(Model* model) const;
  // CPU only: computes on every core this process may run on from here on, where the launcher
  // gave it a share of the host's (OMP_NUM_THREADS) that roles now gone used the rest of.
  // Returns the new thread count, or 0 when nothing changed (a GPU, or no more cores).
  int WidenToEveryCore() const;
  // GPU only: the allocator's statistics; false on the CPU.
  bool MemoryStats(AllocatorStats* stats) const;
  // "GPU memory: in use ..., peak ..., reserved ... in N regions" (empty on the CPU).
  std::string MemoryStatsLine() const;

 private:
  ComputeDevice() = default;
  Device device_ = Device::kCpu;
  DeviceOptions options_;
  std::string who_;
  std::shared_ptr<cuda::GpuContext> gpu_;  // shared_ptr: complete only in GPU builds
};

}  // namespace worker
}  // namespace pstrain
