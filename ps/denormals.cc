#include "ps/denormals.h"

#include <omp.h>

#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace pstrain::ps {
namespace {

void FlushOnThisThread() {
#if defined(__SSE2__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}

}  // namespace

void FlushDenormalsOnThisThreadsTeam() {
  thread_local int flushed_team = 0;
  const int team = omp_get_max_threads();
  if (flushed_team >= team) return;
  FlushOnThisThread();
#pragma omp parallel num_threads(team)
  FlushOnThisThread();
  flushed_team = team;
}

bool ThisThreadFlushesDenormals() {
#if defined(__SSE2__)
  return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON &&
         _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
#else
  return false;
#endif
}

}  // namespace pstrain::ps
