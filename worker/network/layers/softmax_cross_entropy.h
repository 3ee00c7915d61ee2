// The loss layer: softmax cross-entropy with integer labels (below).
#pragma once

#include <memory>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

// Softmax cross-entropy with integer labels: [classes] logits in, one loss per example out.
// The model averages the per-example losses over the batch.
class SoftmaxCrossEntropy : public Layer {
 public:
  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  // Softmax probabilities of the last forward pass, [N, classes].
  const std::vector<float>& probabilities() const { return probs_; }

  PSTRAIN_DECLARE_LAYER()

 private:
  struct GpuPlan;  // probabilities in device memory (worker/network/layers/batch_norm_cuda.cc)
  std::shared_ptr<GpuPlan> gpu_plan_;
  int64_t classes_ = 0;
  std::vector<float> probs_;
  std::vector<int32_t> labels_;
};

}  // namespace worker
}  // namespace pstrain
