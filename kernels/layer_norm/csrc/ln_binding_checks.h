// Checks both LayerNorm bindings (the backward and the dgamma strategies) make before a
// launch; messages name the tensor and both values.
#pragma once

#include <torch/extension.h>

#include "../../common/csrc/binding_checks.h"

// dy like x (shape, device, dtype); mean and rstd float32 on x's device, one value a row.
inline void check_ln_row_inputs(const at::Tensor &x, const at::Tensor &dy,
                                const at::Tensor &mean, const at::Tensor &rstd) {
  const int64_t M = x.size(0);
  TORCH_CHECK(dy.sizes() == x.sizes(), "dy must have x's shape ", x.sizes(), ", got ",
              dy.sizes());
  check_like(dy, x, "dy");
  check_on(mean, x, "mean");
  check_on(rstd, x, "rstd");
  TORCH_CHECK(mean.scalar_type() == at::kFloat && rstd.scalar_type() == at::kFloat,
              "mean and rstd must be float32, got ", mean.scalar_type(), " and ",
              rstd.scalar_type());
  TORCH_CHECK(mean.numel() == M && rstd.numel() == M, "mean and rstd must have ", M,
              " elements (one per row), got ", mean.numel(), " and ", rstd.numel());
}

// A (n,) output on x's device that the kernels index with stride 1.
inline void check_vector_out(const at::Tensor &t, const at::Tensor &x, int64_t n,
                             const char *name) {
  check_on(t, x, name);
  TORCH_CHECK(t.dim() == 1 && t.size(0) == n, name, " must have shape (", n, "), got ",
              t.sizes());
  TORCH_CHECK(n <= 1 || t.stride(0) == 1, name, " must be contiguous");
}
