// Flatten on the CPU: a memory-bound loop, vectorised and split across cores.
#include <algorithm>
#include <cstring>

#include "worker/network/layers/flatten.h"

namespace pstrain {
namespace worker {

void Flatten::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext&) {
  out->CopyFrom(*in[0]);
}

void Flatten::BackwardCpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                          const std::vector<Tensor*>& in_grads, const LayerContext&) {
  if (in_grads[0]) in_grads[0]->CopyFrom(out_grad);
}

}  // namespace worker
}  // namespace pstrain
