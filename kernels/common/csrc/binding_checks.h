// Checks shared by the thin torch bindings: messages name the tensor and both values.
#pragma once

#include <cuda_runtime.h>
#include <torch/extension.h>

#include "dtype.h"

#define CHECK_SHAPE(x, ...)                                                       \
  TORCH_CHECK((x).sizes() == torch::IntArrayRef({__VA_ARGS__}),                   \
              #x " must have shape (" #__VA_ARGS__ "), got ", (x).sizes())

inline DType dtype_of(const at::Tensor &t, const char *name) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    default: TORCH_CHECK(false, name, ": dtype ", t.scalar_type(), " not supported "
                         "(float32, float16, bfloat16)");
  }
}

// `t` is a CUDA tensor on ref's device.
inline void check_on(const at::Tensor &t, const at::Tensor &ref, const char *name) {
  TORCH_CHECK(t.is_cuda() && t.device() == ref.device(), name, " must be on ", ref.device(),
              ", got ", t.device());
}

// ... and has ref's dtype.
inline void check_like(const at::Tensor &t, const at::Tensor &ref, const char *name) {
  check_on(t, ref, name);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), name, " must have dtype ",
              ref.scalar_type(), ", got ", t.scalar_type());
}

// SMs of t's device (the kernels size persistent grids and workspaces by it).
inline int sm_count_of(const at::Tensor &t, const char *who) {
  int sm_count = 0;
  const cudaError_t err =
      cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, t.get_device());
  TORCH_CHECK(err == cudaSuccess, who, ": cudaDeviceGetAttribute failed: ",
              cudaGetErrorString(err));
  return sm_count;
}
