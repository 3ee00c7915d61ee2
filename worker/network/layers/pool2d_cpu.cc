// Pooling on the CPU with oneDNN, primitives cached per (batch size, training). Max pooling in
// training keeps oneDNN's workspace (argmax positions) for the backward pass.
#include "worker/network/cpu/dnnl_context.h"
#include "worker/network/layers/pool2d.h"

namespace pstrain {
namespace worker {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

struct Pool2D::CpuPlan {
  memory::desc src, dst;
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory workspace;
};

Pool2D::CpuPlan& Pool2D::GetCpuPlan(int64_t n, bool training) {
  auto& slot = cpu_plans_[{n, training}];
  if (slot) return *slot;
  auto p = std::make_shared<CpuPlan>();
  const auto f32 = memory::data_type::f32;
  p->src = memory::desc({n, c_, in_h_, in_w_}, f32, tag::nchw);
  p->dst = memory::desc({n, c_, wh_.out, ww_.out}, f32, tag::nchw);
  memory::dims strides{stride_[0], stride_[1]}, kernel{size_[0], size_[1]},
      pad_l{wh_.pad_before, ww_.pad_before}, pad_r{wh_.pad_after, ww_.pad_after};
  const auto alg = kind_ == Kind::kMax ? dnnl::algorithm::pooling_max
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
  const auto prop =
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  auto& eng = cpu::Engine();
  p->fwd_pd = dnnl::pooling_forward::primitive_desc(
      dnnl::pooling_forward::desc(prop, alg, p->src, p->dst, strides, kernel, pad_l, pad_r), eng);
  p->fwd = dnnl::pooling_forward(p->fwd_pd);
  if (training) {
    auto bwd_pd = dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(alg, p->src, p->dst, strides, kernel, pad_l, pad_r), eng,
        p->fwd_pd);
    p->bwd = dnnl::pooling_backward(bwd_pd);
    if (p->fwd_pd.workspace_desc().get_size() > 0) {
      p->workspace = memory(p->fwd_pd.workspace_desc(), eng);
    }
  }
  slot = p;
  return *slot;
}

void Pool2D::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                        const LayerContext& ctx) {
  CpuPlan& p = GetCpuPlan(in[0]->dim(0), ctx.training);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::Wrap(p.src, *in[0])},
                                       {DNNL_ARG_DST, cpu::Wrap(p.dst, *out)}};
  if (p.workspace) args[DNNL_ARG_WORKSPACE] = p.workspace;
  p.fwd.execute(cpu::Stream(), args);
}

void Pool2D::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                         const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                         const LayerContext& /*ctx*/) {
  if (!in_grads[0]) return;
  CpuPlan& p = GetCpuPlan(in[0]->dim(0), true);
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, cpu::Wrap(p.dst, out_grad)},
                                       {DNNL_ARG_DIFF_SRC, cpu::Wrap(p.src, *in_grads[0])}};
  if (p.workspace) args[DNNL_ARG_WORKSPACE] = p.workspace;
  p.bwd.execute(cpu::Stream(), args);
}

}  // namespace worker
}  // namespace pstrain
