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

  // dgamma/dbeta wanted (affine only; null: dx only): per-block partial column sums
  // ws[part][2][layer_norm_ws_row(n)] (0: dgamma, 1: dbeta), written with plain stores and
  // summed in part order by a second kernel
  float *ws;
};

// Which kernel and tiling a problem gets; the binding sizes the workspace from it.
struct LnBwdPlan {
  int tpr;           // threads of a row group (32 ... 1024)
  int chunks;        // C: 16-byte vectors (of x's dtype) per thread and row (per span)
  bool streamed;     // rows longer than a group holds: processed in spans, read twice
  bool vectorized;   // 16-byte loads and stores are legal for x, dy, dx (and gamma)
  bool piped;        // vectorized rows a group holds: streamed through a shared-memory ring
  int parts;         // rows of the workspace (= blocks of the main kernel)
  size_t smem_bytes;  // dynamic shared memory of the main kernel (ring, column sums)
  dim3 grid, block;
};

// Floats of one workspace row half (n rounded up to 8: 32-byte aligned vector accesses).
int layer_norm_ws_row(int n);
// partials: dgamma/dbeta wanted (p.ws is set only after the plan sized it).
LnBwdPlan layer_norm_bwd_plan(const LnBwdParams &p, bool partials, int sm_count);
cudaError_t layer_norm_bwd_launch(const LnBwdParams &p, const LnBwdPlan &plan,
                                  cudaStream_t stream);
