// ReLU, flatten, dropout and add on the GPU: our elementwise kernels and device-to-device
// copies on the compute stream.
#include "worker/network/layers/simple.h"

#include "worker/network/cuda/check.h"
#include "worker/network/cuda/gpu_context.h"
#include "worker/network/cuda/kernels.h"

namespace pstrain {
namespace worker {
namespace {

void CopyOnDevice(const Tensor& from, Tensor* to, const LayerContext& ctx) {
  CHECK_EQ(from.size(), to->size());
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(to->data(), from.data(), from.bytes(),
                                     cudaMemcpyDeviceToDevice, ctx.gpu->stream()));
}

}  // namespace

Status Relu::GpuSupport() const { return Status::OK(); }

void Relu::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) {
  cuda::ReluForward(in[0]->data(), out->data(), out->size(), ctx.gpu->stream());
}

void Relu::BackwardGpu(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& out_grad,
                       const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  if (!in_grads[0]) return;
  cuda::ReluBackward(out.data(), out_grad.data(), in_grads[0]->data(), out.size(),
                     ctx.gpu->stream());
}

Status Flatten::GpuSupport() const { return Status::OK(); }

void Flatten::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                         const LayerContext& ctx) {
  CopyOnDevice(*in[0], out, ctx);
}

void Flatten::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                          const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  if (in_grads[0]) CopyOnDevice(out_grad, in_grads[0], ctx);
}

struct Dropout::GpuPlan {
  int64_t size = 0;
  cuda::DeviceBuffer mask;  // uint8, one per value
};

Status Dropout::GpuSupport() const { return Status::OK(); }

void Dropout::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out,
                         const LayerContext& ctx) {
  const int64_t n = out->size();
  mask_valid_ = ctx.training && keep_prob_ < 1.0f;
  if (!mask_valid_) {
    CopyOnDevice(*in[0], out, ctx);
    return;
  }
  CHECK(ctx.rng != nullptr) << Describe() << ": training needs a random generator";
  if (!gpu_plan_ || gpu_plan_->size < n) {
    auto p = std::make_shared<GpuPlan>();
    p->size = n;
    p->mask = ctx.gpu->AllocateOrDie(static_cast<size_t>(n), Describe() + " mask");
    gpu_plan_ = p;
  }
  // The same rule as the CPU (a 16-bit draw below keep_prob * 65536); one draw of the model's
  // generator seeds a counter-based hash, so runs with the same seed repeat.
  const uint32_t threshold = static_cast<uint32_t>(keep_prob_ * 65536.0f + 0.5f);
  const uint64_t seed = (*ctx.rng)();
  uint8_t* mask = gpu_plan_->mask.as<uint8_t>();
  cuda::DropoutMask(seed, threshold, mask, n, ctx.gpu->stream());
  cuda::ApplyMask(in[0]->data(), mask, 1.0f / keep_prob_, out->data(), n, ctx.gpu->stream());
}

void Dropout::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                          const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  if (!in_grads[0]) return;
  if (!mask_valid_) {
    CopyOnDevice(out_grad, in_grads[0], ctx);
    return;
  }
  cuda::ApplyMask(out_grad.data(), gpu_plan_->mask.as<uint8_t>(), 1.0f / keep_prob_,
                  in_grads[0]->data(), out_grad.size(), ctx.gpu->stream());
}

Status Add::GpuSupport() const { return Status::OK(); }

void Add::ForwardGpu(const std::vector<const Tensor*>& in, Tensor* out, const LayerContext& ctx) {
  cuda::Add(in[0]->data(), in[1]->data(), out->data(), out->size(), ctx.gpu->stream());
}

void Add::BackwardGpu(const std::vector<const Tensor*>&, const Tensor&, const Tensor& out_grad,
                      const std::vector<Tensor*>& in_grads, const LayerContext& ctx) {
  for (Tensor* g : in_grads) {
    if (g) CopyOnDevice(out_grad, g, ctx);
  }
}

}  // namespace worker
}  // namespace pstrain
