// ConvBase's oneDNN plan and the template that fills it with one family of oneDNN's primitives:
// convolution (conv2d) or deconvolution (conv2d_transpose), whose descriptors take the same
// arguments. Included by conv_base_cpu.cc only.
#pragma once

#include "worker/network/cpu/dnnl_context.h"
#include "worker/network/layers/conv_base.h"

namespace pstrain {
namespace worker {

// Primitives are created once per batch size and cached; the layouts are left to oneDNN ("any")
// and reordered from/to our NCHW tensors only when they differ.
struct ConvBase::CpuPlan {
  using memory = dnnl::memory;
  // Ours: NCHW input and output, the weights' layout, the bias (empty without one).
  memory::desc user_src, user_dst, user_w, bias;
  // What MakeDnnlPrimitives reads.
  memory::desc any_src, any_dst, any_w;
  memory::dims strides, pad_l, pad_r;
  dnnl::primitive_desc fwd_pd, bwd_w_pd, bwd_d_pd;
  dnnl::primitive fwd, bwd_w, bwd_d;
  bool has_bwd_data = false;
  // Internal buffers in oneDNN's preferred layouts (only when they differ from ours).
  memory src, dst, w, diff_dst, diff_w, bwd_src, bwd_d_w, diff_src, bwd_d_diff_dst;
};

// oneDNN's two families of primitives whose descriptors take the same arguments, each with its
// direct algorithm.
struct DnnlConvolution {
  using Forward = dnnl::convolution_forward;
  using BackwardWeights = dnnl::convolution_backward_weights;
  using BackwardData = dnnl::convolution_backward_data;
  static constexpr dnnl::algorithm kAlgorithm = dnnl::algorithm::convolution_direct;
};
struct DnnlDeconvolution {
  using Forward = dnnl::deconvolution_forward;
  using BackwardWeights = dnnl::deconvolution_backward_weights;
  using BackwardData = dnnl::deconvolution_backward_data;
  static constexpr dnnl::algorithm kAlgorithm = dnnl::algorithm::deconvolution_direct;
};

template <typename Family>
void MakeDnnlPrimitives(bool need_input_grad, ConvBase::CpuPlan* p) {
  using Forward = typename Family::Forward;
  using BackwardWeights = typename Family::BackwardWeights;
  using BackwardData = typename Family::BackwardData;
  const dnnl::algorithm alg = Family::kAlgorithm;
  auto& eng = cpu::Engine();
  typename Forward::primitive_desc fwd_pd(
      typename Forward::desc(dnnl::prop_kind::forward_training, alg, p->any_src, p->any_w, p->bias,
                             p->any_dst, p->strides, p->pad_l, p->pad_r),
      eng);
  typename BackwardWeights::primitive_desc bwd_w_pd(
      typename BackwardWeights::desc(alg, p->any_src, p->any_w, p->bias, p->any_dst, p->strides,
                                     p->pad_l, p->pad_r),
      eng, fwd_pd);
  p->fwd_pd = fwd_pd;
  p->fwd = Forward(fwd_pd);
  p->bwd_w_pd = bwd_w_pd;
  p->bwd_w = BackwardWeights(bwd_w_pd);
  if (need_input_grad) {
    typename BackwardData::primitive_desc bwd_d_pd(
        typename BackwardData::desc(alg, p->any_src, p->any_w, p->any_dst, p->strides, p->pad_l,
                                    p->pad_r),
        eng, fwd_pd);
    p->bwd_d_pd = bwd_d_pd;
    p->bwd_d = BackwardData(bwd_d_pd);
  }
}

}  // namespace worker
}  // namespace pstrain
