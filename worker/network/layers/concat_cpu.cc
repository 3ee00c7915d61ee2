// Concat on the CPU: per example, each input's block copied to its place (and back for the
// gradients).
#include <algorithm>

#include "worker/network/layers/concat.h"

namespace pstrain {
namespace worker {

void Concat::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext&) {
  const int64_t n = out->dim(0);
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t w = widths_[i];
    const float* x = in[i]->data();
    float* y = out->data() + offset;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < n; ++e) std::copy(x + e * w, x + (e + 1) * w, y + e * width_);
    offset += w;
  }
}

void Concat::BackwardCpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                         const std::vector<Tensor*>& in_grads, const LayerContext&) {
  const int64_t n = out_grad.dim(0);
  int64_t offset = 0;
  for (size_t i = 0; i < in_grads.size(); ++i) {
    const int64_t w = widths_[i];
    if (in_grads[i]) {
      const float* dy = out_grad.data() + offset;
      float* dx = in_grads[i]->data();
#pragma omp parallel for schedule(static)
      for (int64_t e = 0; e < n; ++e) std::copy(dy + e * width_, dy + e * width_ + w, dx + e * w);
    }
    offset += w;
  }
}

}  // namespace worker
}  // namespace pstrain
