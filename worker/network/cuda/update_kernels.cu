// The optimizers' rules on the GPU; each kernel mirrors its host twin in ps/optimizers/.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/cuda/update_kernels.h"

namespace pstrain {
namespace worker {
namespace cuda {
namespace {

__global__ void SgdKernel(UpdateBuffers b, float lr) {
  PSTRAIN_FOR_EACH(i, b.n) b.var[i] = b.var[i] - lr * b.grad[i];
}

__global__ void MomentumKernel(UpdateBuffers b, float lr, float momentum, bool nesterov) {
  float* accum = b.slots[0];
  PSTRAIN_FOR_EACH(i, b.n) {
    const float g = b.grad[i];
    const float a = accum[i] * momentum + g;
    accum[i] = a;
    b.var[i] = nesterov ? b.var[i] - (g * lr + a * momentum * lr) : b.var[i] - a * lr;
  }
}

__global__ void AdamKernel(UpdateBuffers b, float alpha, float one_minus_beta1,
                           float one_minus_beta2, float epsilon) {
  float* m = b.slots[0];
  float* v = b.slots[1];
  PSTRAIN_FOR_EACH(i, b.n) {
    const float g = b.grad[i];
    const float mi = m[i] + (g - m[i]) * one_minus_beta1;
    const float vi = v[i] + (g * g - v[i]) * one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    b.var[i] = b.var[i] - (mi * alpha) / (sqrtf(vi) + epsilon);
  }
}

__global__ void AdagradKernel(UpdateBuffers b, float lr) {
  float* accum = b.slots[0];
  PSTRAIN_FOR_EACH(i, b.n) {
    const float g = b.grad[i];
    const float a = accum[i] + g * g;
    accum[i] = a;
    b.var[i] = b.var[i] - g * lr * (1.0f / sqrtf(a));
  }
}

__global__ void RMSPropKernel(UpdateBuffers b, float lr, float one_minus_decay, float momentum,
                              float epsilon, bool centered) {
  float* ms = b.slots[0];
  float* mom = b.slots[1];
  float* mg = b.slots[2];
  PSTRAIN_FOR_EACH(i, b.n) {
    const float g = b.grad[i];
    const float msi = ms[i] + (g * g - ms[i]) * one_minus_decay;
    float momi;
    if (centered) {
      const float mgi = mg[i] + (g - mg[i]) * one_minus_decay;
      const float denom = (msi - mgi * mgi) + epsilon;
      momi = mom[i] * momentum + (g * lr) * (1.0f / sqrtf(denom));
      mg[i] = mgi;
    } else {
      momi = mom[i] * momentum + (g * lr) / sqrtf(msi + epsilon);
    }
    ms[i] = msi;
    mom[i] = momi;
    b.var[i] = b.var[i] - momi;
  }
}

__global__ void FlagNonFiniteKernel(const float* grad, int64_t n, int* flags, int index) {
  PSTRAIN_FOR_EACH(i, n) {
    if (!isfinite(grad[i])) flags[index] = 1;
  }
}

}  // namespace

void Sgd(const UpdateBuffers& b, float lr, cudaStream_t s) {
  SgdKernel<<<Blocks(b.n), kThreads, 0, s>>>(b, lr);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Momentum(const UpdateBuffers& b, float lr, float momentum, bool nesterov, cudaStream_t s) {
  MomentumKernel<<<Blocks(b.n), kThreads, 0, s>>>(b, lr, momentum, nesterov);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Adam(const UpdateBuffers& b, float alpha, float beta1, float beta2, float epsilon,
          cudaStream_t s) {
  AdamKernel<<<Blocks(b.n), kThreads, 0, s>>>(b, alpha, 1.0f - beta1, 1.0f - beta2, epsilon);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void Adagrad(const UpdateBuffers& b, float lr, cudaStream_t s) {
  AdagradKernel<<<Blocks(b.n), kThreads, 0, s>>>(b, lr);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}
void RMSProp(const UpdateBuffers& b, float lr, float decay, float momentum, float epsilon,
             bool centered, cudaStream_t s) {
  RMSPropKernel<<<Blocks(b.n), kThreads, 0, s>>>(b, lr, 1.0f - decay, momentum, epsilon, centered);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

void FlagNonFinite(const float* grad, int64_t n, int* flags, int index, cudaStream_t s) {
  FlagNonFiniteKernel<<<Blocks(n), kThreads, 0, s>>>(grad, n, flags, index);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
