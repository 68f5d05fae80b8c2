// Seed 002's ways of computing LayerNorm's column sums, each a separate launch so their
// costs can be timed side by side:
//   dgamma[j] = sum_r dy[r,j] * (x[r,j] - mean[r]) * rstd[r],   dbeta[j] = sum_r dy[r,j].
// No torch types: compiles with nvcc alone. Uses LnBwdParams' x, dy, mean, rstd, dgamma,
// dbeta, rows, n, x_row, dy_row, x_dtype, w_dtype (any of fp32/fp16/bf16) and ws; gamma,
// dx and affine are ignored (both sums are always computed).
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "layer_norm_bwd.h"

enum class DgammaStrategy : int {
  kColumnPerThread = 0,  // (a) one thread per column over all rows; fixed order
  kAtomic = 1,           // (b) 32x32 tiles over row slices, every partial atomicAdd-ed
                         //     into fp32 sums (order varies: not deterministic)
  kTile32 = 2,           // (c1) HW4: 32x32 tile, shared buf[32][32] read transposed
                         //      (32-way bank conflicts), warp shuffles; fixed order
  kTile32Padded = 3,     // (c2) the same with buf[32][33]: conflict-free
};

// Floats of fp32 workspace (p.ws) that dgamma_launch needs for this problem; 0 if none.
int64_t dgamma_workspace_floats(DgammaStrategy s, const LnBwdParams &p, int sm_count);

// dgamma and dbeta of p (rounded once to p.w_dtype) on `stream`; p.ws must hold
// dgamma_workspace_floats(s, p, sm_count) floats (same sm_count). Returns the first error.
cudaError_t dgamma_launch(DgammaStrategy s, const LnBwdParams &p, int sm_count,
                          cudaStream_t stream);
