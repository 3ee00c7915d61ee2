// One line for the logs saying where a worker computes, so a user who expected a GPU sees at
// start that this one runs on the CPU.
#pragma once

#include <omp.h>

#include <cstdlib>
#include <string>

namespace pstrain {
namespace worker {

inline std::string DeviceDescription() {
  const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");
  return "computing on the CPU with oneDNN kernels, " + std::to_string(omp_get_max_threads()) +
         " OpenMP threads (CUDA_VISIBLE_DEVICES=" +
         (mask ? "\"" + std::string(mask) + "\"" : "unset") +
         "; GPU kernels are not part of this build yet)";
}

}  // namespace worker
}  // namespace pstrain
