// CHECKs for CUDA, cuDNN and cuBLAS calls inside kernels. A failing call there means a bug or a
// broken device (the shapes were validated at setup), so it stops the process with the call and
// the library's own error text.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <glog/logging.h>

#define PSTRAIN_CUDA_CHECK(expr)                                                                 \
  do {                                                                                           \
    const cudaError_t pstrain_err = (expr);                                                      \
    CHECK_EQ(pstrain_err, cudaSuccess) << #expr << ": " << cudaGetErrorName(pstrain_err) << " (" \
                                       << cudaGetErrorString(pstrain_err) << ")";                \
  } while (0)

#define PSTRAIN_CUDNN_CHECK(expr)                            \
  do {                                                       \
    const cudnnStatus_t pstrain_st = (expr);                 \
    CHECK_EQ(pstrain_st, CUDNN_STATUS_SUCCESS)               \
        << #expr << ": " << cudnnGetErrorString(pstrain_st); \
  } while (0)

#define PSTRAIN_CUBLAS_CHECK(expr)                                  \
  do {                                                              \
    const cublasStatus_t pstrain_st = (expr);                       \
    CHECK_EQ(pstrain_st, CUBLAS_STATUS_SUCCESS)                     \
        << #expr << ": " << cublasGetStatusName(pstrain_st) << " (" \
        << cublasGetStatusString(pstrain_st) << ")";                \
  } while (0)

// Kernel launches report configuration errors only through cudaGetLastError.
#define PSTRAIN_CUDA_CHECK_LAUNCH() PSTRAIN_CUDA_CHECK(cudaGetLastError())
