#include "worker/memory/cuda_backing.h"

#include <cuda_runtime_api.h>

namespace pstrain {
namespace {

std::string CudaError(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace

Result<int> CudaBacking::VisibleDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // Clears the sticky error so later calls are not
                         // confused by it.
    return Unavailable("cudaGetDeviceCount failed: " + CudaError(err));
  }
  return count;
}

Result<std::unique_ptr<CudaBacking>> CudaBacking::Create(int device) {
  ASSIGN_OR_RETURN(const int count, VisibleDeviceCount());
  if (device < 0 || device >= count) {
    return InvalidArgument("CUDA device " + std::to_string(device) + " does not exist; expected " +
                           "0.." + std::to_string(count - 1) + " (" + std::to_string(count) +
                           " visible)");
  }
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    return Unavailable("cudaSetDevice(" + std::to_string(device) + ") failed: " + CudaError(err));
  }
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess) {
    return Unavailable("cudaMemGetInfo on cuda:" + std::to_string(device) +
                       " failed: " + CudaError(err));
  }
  return std::unique_ptr<CudaBacking>(new CudaBacking(device, total_bytes));
}

Result<void *> CudaBacking::Reserve(size_t bytes) {
  cudaError_t err = cudaSetDevice(device_);
  if (err != cudaSuccess) return Unavailable("cudaSetDevice failed: " + CudaError(err));
  void *ptr = nullptr;
  err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted("cudaMalloc of " + std::to_string(bytes) + " bytes on " + name() +
                             " failed: " + CudaError(err));
  }
  return ptr;
}

void CudaBacking::Release(void *ptr, size_t /*bytes*/) {
  // At process exit the runtime may be unloading already (cudaErrorCudartUnloading): log, do
  // not abort.
  const cudaError_t set = cudaSetDevice(device_);
  LOG_IF(ERROR, set != cudaSuccess) << "cudaSetDevice on " << name() << ": " << CudaError(set);
  const cudaError_t err = cudaFree(ptr);
  // A failing cudaFree means a bad pointer or a dead context: nothing sensible
  // to return.
  LOG_IF(ERROR, err != cudaSuccess) << "cudaFree on " << name() << " failed: " << CudaError(err);
}

}  // namespace pstrain
