// The C++ element type of a DType, for the kernels' host launch code: one switch shared by
// every op instead of one per launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dtype.h"

template <typename T> struct TypeTag { using type = T; };

// f(TypeTag<T>{}) for T = float, __half or __nv_bfloat16 as dt says; cudaErrorInvalidValue
// for any other value.
template <typename F>
cudaError_t with_dtype(DType dt, F &&f) {
  switch (dt) {
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat16: return f(TypeTag<__half>{});
    case DType::kBFloat16: return f(TypeTag<__nv_bfloat16>{});
    default: return cudaErrorInvalidValue;
  }
}
