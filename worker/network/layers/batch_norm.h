// Batch normalisation per channel ([C,H,W] inputs) or per feature ([F] inputs). Training uses
// the batch's statistics and updates the moving mean and variance
// (moving = momentum * moving + (1 - momentum) * batch, variance Bessel-corrected);
// evaluation uses the moving statistics. Defaults are TensorFlow's (momentum 0.99, epsilon 1e-3).
#pragma once

#include <memory>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class BatchNorm : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

  PSTRAIN_DECLARE_LAYER()

 private:
  struct GpuPlan;  // cuDNN descriptors and the saved statistics
                   // (worker/network/layers/batch_norm_cuda.cc)
  std::shared_ptr<GpuPlan> gpu_plan_;
  float momentum_ = 0.99f, epsilon_ = 1e-3f;
  int64_t channels_ = 0, spatial_ = 1;  // values per channel per example
  Tensor gamma_, gamma_grad_, beta_, beta_grad_, moving_mean_, moving_var_;
  // Statistics the last forward pass normalised with, for the backward pass.
  std::vector<float> mean_, inv_std_;
  bool used_batch_stats_ = false;
};

}  // namespace worker
}  // namespace pstrain
