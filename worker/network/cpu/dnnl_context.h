// The oneDNN CPU engine and stream shared by every CPU kernel, and small conversions.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "common/tensor.h"

namespace pstrain {
namespace worker {
namespace cpu {

dnnl::engine& Engine();
dnnl::stream& Stream();

inline dnnl::memory::dims Dims(const Shape& s) {
  return dnnl::memory::dims(s.dims().begin(), s.dims().end());
}

// A plain (row-major) f32 descriptor for a tensor shape with the given format.
inline dnnl::memory::desc PlainDesc(const Shape& s, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(Dims(s), dnnl::memory::data_type::f32, tag);
}

// Wraps a tensor's buffer as oneDNN memory without copying.
inline dnnl::memory Wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, Engine(), const_cast<float*>(t.data()));
}

// Memory in the layout `want`: `user` itself when it already has that layout, else a buffer
// that `Reorder` fills. Used where a primitive prefers a blocked layout.
dnnl::memory AsLayout(const dnnl::memory& user, const dnnl::memory::desc& want);
// Copies src into dst when they are different memories (layouts may differ).
void Reorder(const dnnl::memory& src, const dnnl::memory& dst);

// Row-major single-precision GEMM: C = alpha * op(A) op(B) + beta * C, multi-threaded.
void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
