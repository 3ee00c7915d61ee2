// Choosing cuDNN's convolution algorithms, for every layer that convolves (conv2d, whose
// forward, backward-data and backward-filter passes these are, and conv2d_transpose, which runs
// the same three in another order).
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <string>

#include "common/status.h"
#include "worker/memory/growth_allocator.h"

namespace pstrain {
namespace worker {
namespace cuda {

// The most workspace one convolution may ask of the context's shared workspace.
constexpr size_t kMaxConvWorkspace = size_t{512} << 20;

// The first of cuDNN's ranked choices (cudnnGet*Algorithm_v7's results) that succeeded, fits
// kMaxConvWorkspace and computes in FP32 (the descriptors forbid TF32), deterministic ones
// first so that runs repeat; else algorithm 0, which every shape supports.
template <typename Perf>
decltype(Perf::algo) PickConvAlgorithm(const Perf* perf, int count, const std::string& what) {
  for (bool need_deterministic : {true, false}) {
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= kMaxConvWorkspace &&
          p.mathType == CUDNN_FMA_MATH &&
          (!need_deterministic || p.determinism == CUDNN_DETERMINISTIC)) {
        return p.algo;
      }
    }
  }
  LOG(WARNING) << "cuDNN's heuristics offer no FP32 " << what << " algorithm within "
               << FormatBytes(kMaxConvWorkspace) << " of workspace; using algorithm 0";
  return static_cast<decltype(Perf::algo)>(0);
}

}  // namespace cuda
}  // namespace worker
}  // namespace pstrain
