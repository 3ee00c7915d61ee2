// 2-D convolution over NCHW inputs, weights [filters, in_channels, kh, kw], optional bias.
#pragma once

#include <map>
#include <memory>

#include "worker/network/layer.h"
#include "worker/network/layers/init.h"
#include "worker/network/layers/window.h"

namespace pstrain {
namespace worker {

class Conv2D : public Layer {
 public:
  explicit Conv2D(const std::string& name) : Layer(name, "conv2d") {}
  Status Configure(const ConfigNode& node) override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

  struct Geometry {
    int64_t in_c, in_h, in_w, out_c, out_h, out_w, kh, kw, sh, sw;
    Window1D wh, ww;
  };
  const Geometry& geometry() const { return g_; }
  bool has_bias() const { return use_bias_; }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()

 private:
  struct CpuPlan;
  struct GpuPlan;  // cuDNN descriptors, algorithms and workspace
                   // (worker/network/layers/conv2d_cuda.cc)
  GpuPlan& GetGpuPlan(int64_t batch, const LayerContext& ctx);
  CpuPlan& GetCpuPlan(int64_t batch, bool need_input_grad);

  int64_t filters_ = 0;
  std::vector<int64_t> kernel_, stride_;
  Padding padding_ = Padding::kSame;
  bool use_bias_ = true;
  Init init_ = Init::kGlorotUniform;
  Geometry g_{};
  Tensor weights_, weights_grad_, bias_, bias_grad_;
  std::map<int64_t, std::shared_ptr<CpuPlan>> cpu_plans_;
  std::map<int64_t, std::shared_ptr<GpuPlan>> gpu_plans_;  // by batch size
};

}  // namespace worker
}  // namespace pstrain
