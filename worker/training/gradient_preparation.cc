#include "worker/training/gradient_preparation.h"

namespace pstrain {
namespace worker {

void AddWeightDecay(const TrainConfig& config, Variable* v) {
  if (!v->trainable || config.weight_decay <= 0 || v->value.shape().rank() <= 1) return;
  const float wd = static_cast<float>(config.weight_decay);
  float* g = v->grad.data();
  const float* w = v->value.data();
  const int64_t n = v->grad.size();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) g[i] += wd * w[i];
}

void PrepareGradients(const TrainConfig& config, Model* model) {
  std::vector<Tensor*> grads;
  for (Variable* v : model->trainable_variables()) {
    AddWeightDecay(config, v);
    grads.push_back(&v->grad);
  }
  // The worker's side of clipping (ps::ClippingOptions::WorkerSide): the global norm.
  const ps::ClippingOptions worker_side = config.clipping.WorkerSide();
  if (worker_side.by_global_norm) ps::ClipByGlobalNorm(*worker_side.by_global_norm, grads);
}

}  // namespace worker
}  // namespace pstrain
