// Max and average pooling over NCHW inputs. Average pooling with SAME padding divides by the
// number of real (unpadded) pixels in each window, as TensorFlow does.
#pragma once

#include <map>
#include <memory>

#include "worker/network/layer.h"
#include "worker/network/layers/window.h"

namespace pstrain {
namespace worker {

class Pool2D : public Layer {
 public:
  enum class Kind { kMax, kAvg };
  explicit Pool2D(Kind kind) : kind_(kind) {}
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;

  PSTRAIN_DECLARE_LAYER()

 private:
  struct CpuPlan;
  struct GpuPlan;  // cuDNN descriptors (worker/network/layers/pool2d_cuda.cc)
  GpuPlan& GetGpuPlan(int64_t batch, const LayerContext& ctx);
  CpuPlan& GetCpuPlan(int64_t batch, bool training);

  Kind kind_;
  std::vector<int64_t> size_, stride_;
  Padding padding_ = Padding::kValid;
  int64_t c_ = 0, in_h_ = 0, in_w_ = 0;
  Window1D wh_, ww_;
  std::map<std::pair<int64_t, bool>, std::shared_ptr<CpuPlan>> cpu_plans_;
  std::map<int64_t, std::shared_ptr<GpuPlan>> gpu_plans_;  // by batch size
};

class MaxPool2D : public Pool2D {
 public:
  MaxPool2D() : Pool2D(Kind::kMax) {}
};

class AvgPool2D : public Pool2D {
 public:
  AvgPool2D() : Pool2D(Kind::kAvg) {}
};

}  // namespace worker
}  // namespace pstrain
