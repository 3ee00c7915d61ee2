// Naive reference implementations (direct loops, TF padding semantics) to check the fast
// kernels' forward results against.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "common/tensor.h"
#include "worker/network/layers/window.h"

namespace pstrain {
namespace worker {
namespace testing {

inline Tensor ReferenceConv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride,
                            Padding padding) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  Window1D wh = ComputeWindow(h, kh, stride, padding).value();
  Window1D ww = ComputeWindow(wd, kw, stride, padding).value();
  Tensor y(Shape{n, o, wh.out, ww.out});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t f = 0; f < o; ++f)
      for (int64_t oy = 0; oy < wh.out; ++oy)
        for (int64_t ox = 0; ox < ww.out; ++ox) {
          double s = b.empty() ? 0.0 : b[f];
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t iy = oy * stride - wh.pad_before + ky,
                        ix = ox * stride - ww.pad_before + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += x[((i * c + ch) * h + iy) * wd + ix] * w[((f * c + ch) * kh + ky) * kw + kx];
              }
          y[((i * o + f) * wh.out + oy) * ww.out + ox] = static_cast<float>(s);
        }
  return y;
}

// Transposed convolution (tf.nn.conv2d_transpose) with weights [in_channels, filters, kh, kw]:
// each input pixel adds its kernel, weighted, into the output at stride steps; the padding is
// that of the conv2d from an out_h x out_w output back to the input.
inline Tensor ReferenceConvTranspose(const Tensor& x, const Tensor& w, const Tensor& b, int64_t sh,
                                     int64_t sw, Padding padding, int64_t out_h, int64_t out_w) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t f = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  Window1D wh = ComputeWindow(out_h, kh, sh, padding).value();
  Window1D ww = ComputeWindow(out_w, kw, sw, padding).value();
  std::vector<double> acc(n * f * out_h * out_w, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < wd; ++ix)
          for (int64_t o = 0; o < f; ++o)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t oy = iy * sh - wh.pad_before + ky, ox = ix * sw - ww.pad_before + kx;
                if (oy < 0 || oy >= out_h || ox < 0 || ox >= out_w) continue;
                acc[((i * f + o) * out_h + oy) * out_w + ox] +=
                    x[((i * c + ch) * h + iy) * wd + ix] * w[((ch * f + o) * kh + ky) * kw + kx];
              }
  Tensor y(Shape{n, f, out_h, out_w});
  for (int64_t k = 0; k < y.size(); ++k) {
    const int64_t o = (k / (out_h * out_w)) % f;
    y[k] = static_cast<float>(acc[k] + (b.empty() ? 0.0 : b[o]));
  }
  return y;
}

// Max or average (over real pixels only, as TF's SAME average pooling) pooling.
inline Tensor ReferencePool(const Tensor& x, bool max, int64_t size, int64_t stride,
                            Padding padding) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  Window1D wh = ComputeWindow(h, size, stride, padding).value();
  Window1D ww = ComputeWindow(wd, size, stride, padding).value();
  Tensor y(Shape{n, c, wh.out, ww.out});
  for (int64_t i = 0; i < n * c; ++i)
    for (int64_t oy = 0; oy < wh.out; ++oy)
      for (int64_t ox = 0; ox < ww.out; ++ox) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        int count = 0;
        for (int64_t ky = 0; ky < size; ++ky)
          for (int64_t kx = 0; kx < size; ++kx) {
            int64_t iy = oy * stride - wh.pad_before + ky, ix = ox * stride - ww.pad_before + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
            float v = x[(i * h + iy) * wd + ix];
            acc = max ? std::max<double>(acc, v) : acc + v;
            ++count;
          }
        y[(i * wh.out + oy) * ww.out + ox] = static_cast<float>(max ? acc : acc / count);
      }
  return y;
}

}  // namespace testing
}  // namespace worker
}  // namespace pstrain
