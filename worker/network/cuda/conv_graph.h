// One convolution direction through cuDNN's graph (backend) API: the engines its heuristics
// rank for the shape, each that computes as the options allow (plain FP32 FMA unless allow_tf32;
// deterministic when asked) timed on scratch buffers, the fastest kept as an execution plan.
// The legacy API (conv_algorithm.h) reaches only the engines its eight algorithm names map to;
// PyTorch's cudnn.benchmark searches these engine lists, and on an H200 its FP32 ResNet-50
// forward ran implicit-GEMM tiles ours did not (docs/gpu.md).
#pragma once

#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "worker/network/cuda/conv_algorithm.h"

namespace pstrain {
namespace worker {
namespace cuda {

class GpuContext;

enum class ConvDirection { kForward, kBackwardData, kBackwardFilter };

class ConvGraphPlan {
 public:
  // The fastest usable engine for `d` in `direction`, or why there is none (the caller then
  // keeps the legacy algorithm). Its buffers must be 16-byte aligned (Run checks).
  static Result<std::shared_ptr<const ConvGraphPlan>> Create(GpuContext* gpu,
                                                             const ConvDescriptors& d,
                                                             ConvDirection direction,
                                                             const std::string& who);
  ~ConvGraphPlan();
  ConvGraphPlan(const ConvGraphPlan&) = delete;
  ConvGraphPlan& operator=(const ConvGraphPlan&) = delete;

  size_t workspace_bytes() const { return workspace_bytes_; }
  float ms() const { return ms_; }  // its best timed run
  // "engine 12, 0.21 ms" for the logs.
  const std::string& description() const { return description_; }

  // Runs on the handle's stream with alpha 1 and beta 0. By direction: forward reads x and w and
  // writes y; backward data reads w and y (dy) and writes x (dx); backward filter reads x and y
  // (dy) and writes w (dw). False, running nothing, when a buffer is not 16-byte aligned.
  bool Run(cudnnHandle_t handle, const void* x, const void* w, const void* y,
           void* workspace) const;

 private:
  ConvGraphPlan() = default;
  cudnnBackendDescriptor_t plan_ = nullptr;
  size_t workspace_bytes_ = 0;
  float ms_ = 0;
  // Finalized variant packs by their pointers (x, w, y, workspace): a layer's buffers repeat
  // every step, and making a pack costs the host more than running it.
  mutable std::mutex mu_;
  mutable std::map<std::array<const void*, 4>, cudnnBackendDescriptor_t> packs_;
  std::string description_;
};

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
