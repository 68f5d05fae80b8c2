// Launch parameters of the LayerNorm backward over the last dimension: sizes, row strides
// (in elements, not bytes) and raw pointers. No torch types: the kernels compile with nvcc
// alone.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"

struct LnBwdParams {
  int64_t rows;  // M
  int n;         // N, the normalized (last, contiguous) dimension
  DType x_dtype;  // x, dy, dx
  DType w_dtype;  // gamma, dgamma, dbeta (affine only)
  bool affine;

  const void *x, *dy, *gamma;  // gamma contiguous (n,)
  const float *mean, *rstd;    // saved fp32 statistics, contiguous (rows,)
  void *dx, *dgamma, *dbeta;   // dgamma, dbeta contiguous (n,)

  int64_t x_row, dy_row, dx_row;  // row strides; the last dimension has stride 1

  // affine only: per-block partial column sums ws[part][2][n] (0: dgamma, 1: dbeta),
  // written with plain stores and summed in part order by a second kernel
  float *ws;
};

// Which kernel and tiling a problem gets; the binding sizes the workspace from it.
struct LnBwdPlan {
  int path;         // 0: one warp per row, 1: one block per row, 2: block per row, streamed
  int chunks;       // C: 16-byte vectors (of x's dtype) per thread and row (per span)
  bool vectorized;  // 16-byte loads and stores are legal for x, dy, dx (and gamma)
  int parts;        // rows of the workspace (= blocks of the main kernel)
  dim3 grid, block;
};

LnBwdPlan layer_norm_bwd_plan(const LnBwdParams &p, int sm_count);
cudaError_t layer_norm_bwd_launch(const LnBwdParams &p, const LnBwdPlan &plan,
                                  cudaStream_t stream);
