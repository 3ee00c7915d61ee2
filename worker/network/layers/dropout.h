// Inverted dropout (below); the same keep rule on the CPU (mt19937) and the GPU (a counter hash).
#pragma once

#include <memory>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

// Inverted dropout: in training keeps each value with probability keep_prob and scales it by
// 1/keep_prob; in evaluation it is the identity.
class Dropout : public Layer {
 public:
  explicit Dropout(const std::string& name) : Layer(name, "dropout") {}
  Status Configure(const ConfigNode& node) override;
  Result<GraphOp> TensorFlowOp() const override;
  Result<GraphOp> OnnxOp() const override;
  Result<Shape> Setup(const std::vector<Shape>& inputs) override { return inputs[0]; }
  float keep_prob() const { return keep_prob_; }

 protected:
  void ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                  const LayerContext& ctx) override;
  void BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& out_grad,
                   const std::vector<Tensor*>& in_grads, const LayerContext& ctx) override;
  PSTRAIN_DECLARE_GPU_KERNELS()

 private:
  struct GpuPlan;  // the mask in device memory (worker/network/layers/simple_cuda.cc)
  std::shared_ptr<GpuPlan> gpu_plan_;
  float keep_prob_ = 0.5f;
  std::vector<uint8_t> mask_;
  bool mask_valid_ = false;
};

}  // namespace worker
}  // namespace pstrain
