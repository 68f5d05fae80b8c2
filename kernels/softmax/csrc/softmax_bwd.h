// Launch parameters of the softmax backward along the last dim with the fused dropout
// backward: sizes, row strides (in elements, not bytes) and raw pointers. No torch types:
// the kernels compile with nvcc alone. The last dimension must be contiguous (stride 1);
// rows may have any stride.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"

struct SoftmaxBwdParams {
  int64_t rows;  // < 2^31 (grid limit), checked by the binding
  int n;         // row length N
  DType dtype; // y, dy, dx
  bool dropout;  // mask and scale given
  float scale;   // 1/(1-p) with dropout

  const void *y, *dy;
  const uint8_t *mask;  // bool keep mask, 1 byte per element (nonzero = kept)
  void *dx;
  int64_t y_row, dy_row, mask_row, dx_row;  // row strides in elements
};

// Which kernel and tiling a problem gets.
struct SoftmaxBwdPlan {
  bool warp_per_row;  // one warp per row, 4 rows per block; else one block per row
  bool vectorized;    // 16-byte accesses of y, dy, dx (and V-byte of the mask) are legal
  bool streamed;      // the row exceeds the registers: the rest is read twice
  bool split;         // block rows staging their last chunks in shared memory
                      // (softmax_bwd_split_kernel): bf16 C = 2, fp32 C = 4
  int chunks;         // C: 16-byte vectors per thread held in registers (1, 2, 4, 8)
  dim3 grid, block;
};

SoftmaxBwdPlan softmax_bwd_plan(const SoftmaxBwdParams &p);
cudaError_t softmax_bwd_launch(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan,
                               cudaStream_t stream);
