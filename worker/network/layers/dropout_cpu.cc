// Dropout on the CPU: a memory-bound loop, vectorised and split across cores.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "worker/network/layers/dropout.h"

namespace pstrain {
namespace worker {
namespace {

// out = keep ? in * scale : 0, as a bitwise AND of the product with a mask widened from the
// keep byte: vectorised, where `m[i] ? in[i] * scale : 0.0f` became a branch that mispredicts
// on half the elements (keep_prob 0.5 is a coin flip). The product is computed for dropped
// elements too, and masked to +0.
void KeepMasked(const uint8_t* keep, const float* in, float scale, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = in[i] * scale;
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bits &= 0u - static_cast<uint32_t>(keep[i]);
    std::memcpy(&out[i], &bits, sizeof(bits));
  }
}

}  // namespace

void Dropout::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                         const LayerContext& ctx) {
  const int64_t n = out->size();
  mask_valid_ = ctx.training && keep_prob_ < 1.0f;
  if (!mask_valid_) {
    out->CopyFrom(*in[0]);
    return;
  }
  CHECK(ctx.rng != nullptr) << Describe() << ": training needs a random generator";
  mask_.resize(n);
  // 64 random bits give four 16-bit draws; keep when draw < keep_prob * 65536.
  const uint32_t threshold = static_cast<uint32_t>(keep_prob_ * 65536.0f + 0.5f);
  for (int64_t i = 0; i < n; i += 4) {
    uint64_t bits = (*ctx.rng)();
    for (int64_t j = i; j < std::min<int64_t>(n, i + 4); ++j, bits >>= 16) {
      mask_[j] = (bits & 0xffff) < threshold;
    }
  }
  const float scale = 1.0f / keep_prob_;
  const float* x = in[0]->data();
  const uint8_t* m = mask_.data();
  float* y = out->data();
  KeepMasked(m, x, scale, y, n);
}

void Dropout::BackwardCpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                          const std::vector<Tensor*>& in_grads, const LayerContext&) {
  if (!in_grads[0]) return;
  if (!mask_valid_) {
    in_grads[0]->CopyFrom(out_grad);
    return;
  }
  const float scale = 1.0f / keep_prob_;
  const float* dy = out_grad.data();
  const uint8_t* m = mask_.data();
  float* dx = in_grads[0]->data();
  const int64_t n = out_grad.size();
  KeepMasked(m, dy, scale, dx, n);
}

}  // namespace worker
}  // namespace pstrain
