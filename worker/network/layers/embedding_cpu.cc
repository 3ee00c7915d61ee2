// Embedding on the CPU: examples split across cores; backward adds each slot's share into the
// row it read, examples in order (rows shared by several examples take no locks).
#include <algorithm>

#include "worker/network/layers/embedding.h"

namespace pstrain {
namespace worker {

void Embedding::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext&) {
  const float* slots = in[0]->data();
  const float* rows = variables()[0].value.data();
  float* y = out->data();
  const int64_t n = out->dim(0), d = dimension_, l = slots_;
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < n; ++e) {
    float* ye = y + e * d;
    std::fill(ye, ye + d, 0.0f);
    int64_t used = 0;
    for (int64_t s = 0; s < l; ++s) {
      const int64_t r = RowIndex(slots[e * l + s]);
      if (r < 0) continue;
      ++used;
      const float* row = rows + r * d;
      for (int64_t k = 0; k < d; ++k) ye[k] += row[k];
    }
    if (combiner_ == Combiner::kMean && used > 1) {
      const float scale = 1.0f / static_cast<float>(used);
      for (int64_t k = 0; k < d; ++k) ye[k] *= scale;
    }
  }
}

void Embedding::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor&,
                            const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                            const LayerContext&) {
  if (in_grads[0]) in_grads[0]->SetZero();  // slot indices have no gradient
  Variable& rows = variables()[0];
  rows.grad.SetZero();
  const float* slots = in[0]->data();
  const float* dy = out_grad.data();
  float* grad = rows.grad.data();
  const int64_t n = out_grad.dim(0), d = dimension_, l = slots_;
  for (int64_t e = 0; e < n; ++e) {
    int64_t used = 0;
    for (int64_t s = 0; s < l; ++s) used += RowIndex(slots[e * l + s]) >= 0;
    const float scale =
        combiner_ == Combiner::kMean && used > 1 ? 1.0f / static_cast<float>(used) : 1.0f;
    for (int64_t s = 0; s < l; ++s) {
      const int64_t r = RowIndex(slots[e * l + s]);
      if (r < 0) continue;
      float* g = grad + r * d;
      for (int64_t k = 0; k < d; ++k) g[k] += scale * dy[e * d + k];
    }
  }
}

}  // namespace worker
}  // namespace pstrain
