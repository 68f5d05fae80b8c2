// cuBLAS and CUDA failures as a Status naming the call (nothing throws: a C++ exception out
// of our extensions crashed the H200 image's Python, docs/cuda-kernels.md#known-problems).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "linear_bwd_launch.h"

namespace linear_bwd {

inline std::string blas_error(const char *call, cublasStatus_t s) {
  return std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)) +
         " (" + cublasLtGetStatusName(s) + ": " + cublasLtGetStatusString(s) + ")";
}

inline std::string cuda_error(const char *call, cudaError_t e) {
  return std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

}  // namespace linear_bwd

#define LT_CHECK(call)                                                                 \
  do {                                                                                 \
    const cublasStatus_t s_ = (call);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
      return ::linear_bwd::Status::error(::linear_bwd::blas_error(#call, s_));         \
  } while (0)

#define CUDART_CHECK(call)                                                             \
  do {                                                                                 \
    const cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess)                                                             \
      return ::linear_bwd::Status::error(::linear_bwd::cuda_error(#call, e_));         \
  } while (0)
