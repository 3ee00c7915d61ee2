// The optimizers' element-wise rules as CUDA kernels: the arithmetic of ps/optimizers/<name>.cc
// in the same order, over one variable in device memory. All run on the given stream; `n` is
// the element count; slots in ps::Optimizer::slot_names() order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pstrain {
namespace worker {
namespace cuda {

// One variable's buffers: its value, gradient and up to three slots.
struct UpdateBuffers {
  float* var;
  const float* grad;
  float* slots[3];
  int64_t n;
};

// The rules by type, with their options (ps/optimizer.h). Adam takes its bias-corrected step
// size `alpha`, which the caller computes as the host does.
void Sgd(const UpdateBuffers& b, float lr, cudaStream_t stream);
void Momentum(const UpdateBuffers& b, float lr, float momentum, bool nesterov, cudaStream_t stream);
void Adam(const UpdateBuffers& b, float alpha, float beta1, float beta2, float epsilon,
          cudaStream_t stream);
void Adagrad(const UpdateBuffers& b, float lr, cudaStream_t stream);
void RMSProp(const UpdateBuffers& b, float lr, float decay, float momentum, float epsilon,
             bool centered, cudaStream_t stream);

// flags[index] = 1 when grad[0, n) holds a NaN or an infinity; untouched otherwise.
void FlagNonFinite(const float* grad, int64_t n, int* flags, int index, cudaStream_t stream);

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
