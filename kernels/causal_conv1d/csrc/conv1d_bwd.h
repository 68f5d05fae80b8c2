// Launch parameters of the causal conv1d backward: sizes, strides (in elements, not
// bytes) and raw pointers. No torch types: the kernels compile with nvcc alone.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"

struct ConvBwdParams {
  int batch, dim, seqlen, width;
  DType x_dtype;  // x, dout, dx, initial/final states and their gradients
  DType w_dtype;  // weight, bias, dweight, dbias
  bool silu, has_bias, has_seq_idx, has_init, has_dfinal, want_dinit;

  const void *x, *weight, *bias, *dout, *init, *dfinal;
  const int32_t *seq_idx;
  void *dx, *dinit, *dweight, *dbias;

  int64_t x_b, x_d, x_t;
  int64_t dout_b, dout_d, dout_t;
  int64_t dx_b, dx_d, dx_t;
  int64_t init_b, init_d, init_t;
  int64_t dfinal_b, dfinal_d, dfinal_t;
  int64_t dinit_b, dinit_d, dinit_t;
  int64_t w_d, w_k, bias_d, dw_d, dw_k, dbias_d;
  int64_t seq_b, seq_t;

  // fixed-order reduction: per-tile partials of dweight (width) and dbias (1) per channel,
  // ws[part][dim][width + 1], summed in part order by a second kernel
  float *ws;
};

// Which kernel and tiling a problem gets; the binding sizes the workspace from it.
struct ConvBwdPlan {
  bool channel_first;  // x is time-contiguous (stride(2) == 1)
  bool vectorized;     // 8/16-byte loads and stores are legal for x, dout and dx
  int parts;           // rows of the workspace
  dim3 grid, block;
  int seg_len;         // channel-last: time steps per thread
  int tiles_per_span;  // channel-first: warp tiles (32 x 16 bytes of steps) per warp
};

ConvBwdPlan conv1d_bwd_plan(const ConvBwdParams &p);
cudaError_t conv1d_bwd_launch(const ConvBwdParams &p, const ConvBwdPlan &plan,
                              cudaStream_t stream);
