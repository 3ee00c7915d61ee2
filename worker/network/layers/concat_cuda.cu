// Concat on the GPU: one strided copy kernel per input, each way.
#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/launch.cuh"
#include "worker/network/layers/concat.h"

namespace pstrain {
namespace worker {

namespace cuda {
namespace {

// n rows of `width` floats from rows `from_stride` apart to rows `to_stride` apart.
__global__ void CopyRowsKernel(const float* from, int64_t from_stride, float* to, int64_t to_stride,
                               int64_t n, int64_t width) {
  PSTRAIN_FOR_EACH(i, n * width) {
    const int64_t e = i / width, k = i % width;
    to[e * to_stride + k] = from[e * from_stride + k];
  }
}

void CopyRows(const float* from, int64_t from_stride, float* to, int64_t to_stride, int64_t n,
              int64_t width, cudaStream_t stream) {
  CopyRowsKernel<<<Blocks(n * width), kThreads, 0, stream>>>(from, from_stride, to, to_stride, n,
                                                             width);
  PSTRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace cuda

Status Concat::GpuSupport() const { return Status::OK(); }

void Concat::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                        const LayerContext& ctx) {
  const int64_t n = out->dim(0);
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    cuda::CopyRows(in[i]->data(), widths_[i], out->data() + offset, width_, n, widths_[i],
                   ctx.gpu->stream());
    offset += widths_[i];
  }
}

void Concat::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                         const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  const int64_t n = out_grad.dim(0);
  int64_t offset = 0;
  for (size_t i = 0; i < in_grads.size(); ++i) {
    if (in_grads[i]) {
      cuda::CopyRows(out_grad.data() + offset, width_, in_grads[i]->data(), widths_[i], n,
                     widths_[i], ctx.gpu->stream());
    }
    offset += widths_[i];
  }
}

}  // namespace worker
}  // namespace pstrain
