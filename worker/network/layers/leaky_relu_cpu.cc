// LeakyRelu on the CPU: memory-bound loops, vectorised and split across cores. The gradient is
// taken from the input, as TensorFlow's LeakyReluGrad (the output's sign is the input's only for
// alpha >= 0).
#include "worker/network/layers/leaky_relu.h"

namespace pstrain {
namespace worker {

void LeakyRelu::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext&) {
  const float* x = in[0]->data();
  float* y = out->data();
  const float alpha = alpha_;
  const int64_t n = out->size();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
}

void LeakyRelu::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor&,
                            const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                            const LayerContext&) {
  if (!in_grads[0]) return;
  const float* x = in[0]->data();
  const float* dy = out_grad.data();
  float* dx = in_grads[0]->data();
  const float alpha = alpha_;
  const int64_t n = out_grad.size();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] = x[i] > 0.0f ? g : alpha * g;
  }
}

}  // namespace worker
}  // namespace pstrain
