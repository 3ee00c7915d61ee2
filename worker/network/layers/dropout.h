// Inverted dropout (below); the same keep rule on the CPU (mt19937) and the GPU (a counter hash).
#pragma once

#include <memory>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

// Inverted dropout: in training keeps each value with probability keep_prob and scales it by
// 1/keep_prob; in evaluation it is the identity.
class Dropout : public ElementwiseLayer {
 public:
  float keep_prob() const { return keep_prob_; }

  PSTRAIN_DECLARE_LAYER()

 private:
  struct GpuPlan;  // the mask in device memory (worker/network/layers/simple_cuda.cc)
  std::shared_ptr<GpuPlan> gpu_plan_;
  float keep_prob_ = 0.5f;
  std::vector<uint8_t> mask_;
  bool mask_valid_ = false;
};

}  // namespace worker
}  // namespace pstrain
