// Add on the CPU: a memory-bound loop, vectorised and split across cores.
#include <algorithm>
#include <cstring>

#include "worker/network/layers/add.h"

namespace pstrain {
namespace worker {

void Add::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext&) {
  const float* a = in[0]->data();
  const float* b = in[1]->data();
  float* y = out->data();
  const int64_t n = out->size();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void Add::BackwardCpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                      const std::vector<Tensor*>& in_grads, const LayerContext&) {
  for (Tensor* g : in_grads) {
    if (g) g->CopyFrom(out_grad);
  }
}

}  // namespace worker
}  // namespace pstrain
