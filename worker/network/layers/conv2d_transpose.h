// Transposed 2-D convolution (deconvolution), as TensorFlow's tf.nn.conv2d_transpose and Keras'
// Conv2DTranspose, over NCHW: the input gradient of the conv2d that maps this layer's output back
// to its input. Fields as conv2d's (filters, kernel, stride, padding, use_bias, init) and an
// optional output_size [h, w] where strides make it ambiguous.
//
// Output size as Keras computes it: SAME in * stride, VALID in * stride + max(kernel - stride, 0)
// ((in - 1) * stride + kernel when kernel >= stride). An explicit output_size must satisfy
// TensorFlow's rule: the conv2d of that size (same kernel, stride, padding) gives the input size.
// The padding is that conv2d's (window.h), so SAME's odd pixel falls after, as in TensorFlow.
//
// Weights [in_channels, filters, kh, kw]: the OIHW weights of that conv2d (its out = our in),
// PyTorch's ConvTranspose2d layout, TensorFlow's [kh, kw, filters, in_channels] transposed to
// channels first; so conv2d_transpose(W) is the adjoint of conv2d(W). Bias [filters]. That conv2d
// is conv_base.h's conv, which holds the fields, the geometry and the kernels.
//
// Exported as tf.nn.conv2d_transpose's op and ONNX's ConvTranspose, whose weights layout
// (C, M/group, kH, kW) is ours. An explicit output_size that no conv2d maps back to the input is
// an error naming it.
#pragma once

#include <string>
#include <vector>

#include "worker/network/layers/conv_base.h"

namespace pstrain {
namespace worker {

class Conv2DTranspose : public ConvBase {
 public:
  Conv2DTranspose() : ConvBase(/*transposed=*/true) {}
  Status Configure(const ConfigNode& node) override;
  PSTRAIN_DECLARE_CONV_LAYER()

 private:
  std::vector<int64_t> output_size_;  // empty: computed
};

}  // namespace worker
}  // namespace pstrain
