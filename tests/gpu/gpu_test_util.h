// What the GPU tests share: one GPU context for the process, the skip when no GPU is visible,
// and copies between host and device tensors.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "worker/network/cuda/gpu_context.h"
#include "worker/network/device_placement.h"

namespace pstrain {
namespace worker {
namespace testing {

// Null (with the reason in *why) when no GPU is visible.
inline cuda::GpuContext* TestGpu(std::string* why) {
  static std::string reason;
  static cuda::GpuContext* gpu = [] {
    const std::string mask = CudaVisibleDevicesText(std::getenv("CUDA_VISIBLE_DEVICES"));
    Result<int> count = CudaBacking::VisibleDeviceCount();
    if (!count.ok() || *count == 0) {
      reason = "no GPU visible (" + mask + ": " +
               (count.ok() ? "cudaGetDeviceCount returned 0" : count.status().message()) + ")";
      return static_cast<cuda::GpuContext*>(nullptr);
    }
    auto created = cuda::GpuContext::Create(cuda::GpuOptions{});
    if (!created.ok()) {
      reason = "GPU context failed (" + mask + "): " + created.status().ToString();
      return static_cast<cuda::GpuContext*>(nullptr);
    }
    return created->release();  // lives until exit: tensors in static test data may use it
  }();
  *why = reason;
  return gpu;
}

#define PSTRAIN_GPU_OR_SKIP(gpu)                     \
  std::string gpu_skip_reason;                       \
  cuda::GpuContext* gpu = TestGpu(&gpu_skip_reason); \
  if (!gpu) GTEST_SKIP() << gpu_skip_reason

inline Tensor ToDevice(const Tensor& host, cuda::GpuContext* gpu) {
  Tensor d = gpu->NewTensorOrDie(host.shape(), "test input");
  gpu->Upload({{&host, &d}});
  return d;
}

inline Tensor ToHost(const Tensor& device, cuda::GpuContext* gpu) {
  Tensor h = Tensor::Uninitialized(device.shape());
  gpu->Download({{&device, &h}});
  return h;
}

}  // namespace testing
}  // namespace worker
}  // namespace pstrain
