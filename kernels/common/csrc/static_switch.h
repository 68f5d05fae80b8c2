// Run-time values as compile-time template parameters, for the host launch code of every
// op (after Dao's causal-conv1d static_switch.h): each macro calls the lambda it is given
// with NAME a constant equal to the value, one instantiation a value, e.g.
//   DTYPE_SWITCH(p.dtype, T, [&] {
//     return BOOL_SWITCH(p.dropout, kDrop, [&] { return launch<T, kDrop>(p, stream); });
//   });
// DTYPE_SWITCH and INT_SWITCH return cudaErrorInvalidValue for a value they do not list,
// so their lambdas return cudaError_t. Host code only; no torch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "dtype.h"

// The lambda with CONST_NAME a constexpr bool equal to COND; its value.
#define BOOL_SWITCH(COND, CONST_NAME, ...)                                   \
  [&] {                                                                      \
    if (COND) {                                                              \
      constexpr static bool CONST_NAME = true;                               \
      return __VA_ARGS__();                                                  \
    } else {                                                                 \
      constexpr static bool CONST_NAME = false;                              \
      return __VA_ARGS__();                                                  \
    }                                                                        \
  }()

// The lambda with TYPE_NAME the C++ element type of DT: float, __half or __nv_bfloat16.
#define DTYPE_SWITCH(DT, TYPE_NAME, ...)                                     \
  [&]() -> cudaError_t {                                                     \
    switch (DT) {                                                            \
      case DType::kFloat32: {                                                \
        using TYPE_NAME = float;                                             \
        return __VA_ARGS__();                                                \
      }                                                                      \
      case DType::kFloat16: {                                                \
        using TYPE_NAME = __half;                                            \
        return __VA_ARGS__();                                                \
      }                                                                      \
      case DType::kBFloat16: {                                               \
        using TYPE_NAME = __nv_bfloat16;                                     \
        return __VA_ARGS__();                                                \
      }                                                                      \
      default: return cudaErrorInvalidValue;                                 \
    }                                                                        \
  }()

// The lambda with CONST_NAME a constexpr int equal to V, for V one of the parenthesised
// VALUES: INT_SWITCH(p.width, K, (2, 3, 4), [&] { ... }).
#define INT_SWITCH(V, CONST_NAME, VALUES, ...)                               \
  static_switch::int_switch<STATIC_SWITCH_UNPAREN VALUES>(                   \
      V, [&](auto CONST_NAME##_tag) {                                        \
        constexpr static int CONST_NAME = decltype(CONST_NAME##_tag)::value; \
        return __VA_ARGS__();                                                \
      })

#define STATIC_SWITCH_UNPAREN(...) __VA_ARGS__

namespace static_switch {

// f(std::integral_constant<int, v>{}) for v one of kValues, else cudaErrorInvalidValue.
template <int... kValues, typename F>
cudaError_t int_switch(int v, F &&f) {
  cudaError_t err = cudaErrorInvalidValue;
  (void)((v == kValues && (err = f(std::integral_constant<int, kValues>{}), true)) || ...);
  return err;
}

}  // namespace static_switch
