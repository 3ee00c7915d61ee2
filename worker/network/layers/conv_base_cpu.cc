// ConvBase on the CPU with oneDNN: the conv's convolution primitives, or for conv2d_transpose
// (whose forward pass is the conv's input gradient) oneDNN's deconvolution ones, in one plan per
// batch size. The input gradient is skipped when nothing upstream needs it (the first layer).
#include "worker/network/layers/conv_base_cpu.h"

#include <unordered_map>
#include <utility>

namespace pstrain {
namespace worker {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

ConvBase::CpuPlan& ConvBase::GetCpuPlan(int64_t n, bool need_input_grad) {
  auto& slot = cpu_plans_[n];
  if (slot && (slot->has_bwd_data || !need_input_grad)) return *slot;
  auto p = std::make_shared<CpuPlan>();
  const auto f32 = memory::data_type::f32;
  // oneDNN's weights dims are {out_c, in_c} for both families; ours are the conv's OIHW, which is
  // oneDNN's deconvolution `iohw`.
  memory::dims src_d{n, g_.in_c, g_.in_h, g_.in_w}, dst_d{n, g_.out_c, g_.out_h, g_.out_w},
      w_d{g_.out_c, g_.in_c, g_.kh, g_.kw};
  p->user_src = memory::desc(src_d, f32, tag::nchw);
  p->user_dst = memory::desc(dst_d, f32, tag::nchw);
  p->user_w = memory::desc(w_d, f32, transposed_ ? tag::iohw : tag::oihw);
  if (use_bias_) p->bias = memory::desc({g_.out_c}, f32, tag::x);
  p->any_src = memory::desc(src_d, f32, tag::any);
  p->any_dst = memory::desc(dst_d, f32, tag::any);
  p->any_w = memory::desc(w_d, f32, tag::any);
  p->strides = {g_.sh, g_.sw};
  p->pad_l = {g_.wh.pad_before, g_.ww.pad_before};
  p->pad_r = {g_.wh.pad_after, g_.ww.pad_after};
  if (transposed_) {
    MakeDnnlPrimitives<DnnlDeconvolution>(need_input_grad, p.get());
  } else {
    MakeDnnlPrimitives<DnnlConvolution>(need_input_grad, p.get());
  }
  auto& eng = cpu::Engine();
  auto make = [&](const memory::desc& want, const memory::desc& user) {
    return want == user ? memory() : memory(want, eng);
  };
  p->src = make(p->fwd_pd.src_desc(), p->user_src);
  p->dst = make(p->fwd_pd.dst_desc(), p->user_dst);
  p->w = make(p->fwd_pd.weights_desc(), p->user_w);
  p->bwd_src = make(p->bwd_w_pd.src_desc(), p->user_src);
  p->diff_dst = make(p->bwd_w_pd.diff_dst_desc(), p->user_dst);
  p->diff_w = make(p->bwd_w_pd.diff_weights_desc(), p->user_w);
  if (need_input_grad) {
    p->has_bwd_data = true;
    p->bwd_d_w = make(p->bwd_d_pd.weights_desc(), p->user_w);
    p->diff_src = make(p->bwd_d_pd.diff_src_desc(), p->user_src);
    p->bwd_d_diff_dst = make(p->bwd_d_pd.diff_dst_desc(), p->user_dst);
  }
  slot = p;
  return *slot;
}

namespace {
// `internal` when the primitive wants its own layout (filled from `user` if `fill`), else `user`.
memory Staged(const memory& internal, const memory& user, bool fill) {
  if (!internal) return user;
  if (fill) cpu::Reorder(user, internal);
  return internal;
}

// Runs `primitive` on its staged inputs `args`, its output `out_arg` written to `user_out`
// through `internal_out` when it wants its own layout there.
void RunInto(const dnnl::primitive& primitive, std::unordered_map<int, memory> args, int out_arg,
             const memory& internal_out, const memory& user_out) {
  const memory out = Staged(internal_out, user_out, false);
  args[out_arg] = out;
  primitive.execute(cpu::Stream(), args);
  if (internal_out) cpu::Reorder(out, user_out);
}
}  // namespace

void ConvBase::ForwardCpu(const std::vector<const Tensor*>& in, Tensor* out,
                          const LayerContext& /*ctx*/) {
  CpuPlan& p = GetCpuPlan(in[0]->dim(0), false);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, Staged(p.src, cpu::Wrap(p.user_src, *in[0]), true)},
      {DNNL_ARG_WEIGHTS, Staged(p.w, cpu::Wrap(p.user_w, weights_), true)}};
  if (use_bias_) args[DNNL_ARG_BIAS] = cpu::Wrap(p.bias, bias_);
  RunInto(p.fwd, std::move(args), DNNL_ARG_DST, p.dst, cpu::Wrap(p.user_dst, *out));
}

void ConvBase::BackwardCpu(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                           const Tensor& out_grad, const std::vector<Tensor*>& in_grads,
                           const LayerContext& /*ctx*/) {
  const bool need_input_grad = in_grads[0] != nullptr;
  CpuPlan& p = GetCpuPlan(in[0]->dim(0), need_input_grad);
  memory user_diff_dst = cpu::Wrap(p.user_dst, out_grad);
  memory diff_dst = Staged(p.diff_dst, user_diff_dst, true);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, Staged(p.bwd_src, cpu::Wrap(p.user_src, *in[0]), true)},
      {DNNL_ARG_DIFF_DST, diff_dst}};
  if (use_bias_) args[DNNL_ARG_DIFF_BIAS] = cpu::Wrap(p.bias, bias_grad_);
  RunInto(p.bwd_w, std::move(args), DNNL_ARG_DIFF_WEIGHTS, p.diff_w,
          cpu::Wrap(p.user_w, weights_grad_));

  if (!need_input_grad) return;
  memory dd = p.bwd_d_diff_dst && p.bwd_d_pd.diff_dst_desc() == diff_dst.get_desc()
                  ? diff_dst
                  : Staged(p.bwd_d_diff_dst, user_diff_dst, true);
  RunInto(p.bwd_d,
          {{DNNL_ARG_DIFF_DST, dd},
           {DNNL_ARG_WEIGHTS, Staged(p.bwd_d_w, cpu::Wrap(p.user_w, weights_), true)}},
          DNNL_ARG_DIFF_SRC, p.diff_src, cpu::Wrap(p.user_src, *in_grads[0]));
}

}  // namespace worker
}  // namespace pstrain
