#include "worker/network/cpu/dnnl_context.h"

#include <glog/logging.h>

namespace pstrain {
namespace worker {
namespace cpu {

dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  static dnnl::stream* stream = new dnnl::stream(Engine());
  return *stream;
}

dnnl::memory AsLayout(const dnnl::memory& user, const dnnl::memory::desc& want) {
  if (user.get_desc() == want) return user;
  return dnnl::memory(want, Engine());
}

void Reorder(const dnnl::memory& src, const dnnl::memory& dst) {
  if (src.get() == dst.get()) return;
  dnnl::reorder(src, dst).execute(Stream(), const_cast<dnnl::memory&>(src),
                                  const_cast<dnnl::memory&>(dst));
}

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                                ldb, beta, c, ldc);
  CHECK_EQ(st, dnnl_success) << "dnnl_sgemm failed for m=" << m << " n=" << n << " k=" << k;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
