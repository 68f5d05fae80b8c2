// Parameters of the one-launch multi-tensor AdamW step (adamw_step.cu): a table of the
// list's tensors on the device, and the step's scalars, and the launch's plan. Host code
// and kernels share it; no torch.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"

// Elements of one chunk: the unit a block takes from the list (a tensor has
// ceil(numel / kAdamwChunk) of them, numbered from its chunk_begin).
constexpr int64_t kAdamwChunk = 16384;
// Consecutive steps one call may take (their bias corrections live in shared memory).
constexpr int kAdamwMaxSteps = 16;

// One tensor of the parameter list, as the kernel sees it.
struct AdamwTensor {
  void *param;                // parameter dtype
  const void *grad;           // gradient dtype
  float *exp_avg;
  float *exp_avg_sq;
  float *max_exp_avg_sq;      // amsgrad only
  float *master;              // fp32 master weights only
  int64_t numel;
  int64_t chunk_begin;        // its first chunk in the launch's numbering
  int32_t aligned;            // every pointer 16-byte aligned: 4-element vector accesses
  int32_t pad_;
};

struct AdamwParams {
  const AdamwTensor *tensors;  // device table, n_tensors entries, chunk_begin increasing
  int n_tensors;
  int64_t n_chunks;
  DType param_dtype, grad_dtype;
  bool master, amsgrad, maximize, clip;
  bool scaler;                 // GradScaler's skip on an inf or NaN (else a plain step)
  // 1 - beta and 1 - lr * weight_decay come from the host in double: formed in fp32 from
  // a rounded beta2 = 0.999, 1 - beta2 is 1.3e-5 off (20 ulps in v)
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, decay;
  double beta1_d, beta2_d;     // for the bias corrections 1 - beta^t
  int64_t step;                // the step count of the first update
  int steps;
  float inv_scale;             // 1 / loss scale
  double max_norm;
  float *found_inf;            // (1,): 1 when a gradient held an inf or NaN (nothing moved)
  // scratch of at least adamw_max_grid() entries each, and a grid barrier of two words
  // that starts zeroed and is left zeroed
  double *partial_sumsq;
  int *partial_found;
  unsigned *barrier;
};

// The grid a step gets (adamw_plan.cpp); the binding sizes the scratch from adamw_max_grid.
struct AdamwPlan {
  dim3 grid, block;  // grid.x 0: no block of the kernel fits the device
};

// Numbers the list's chunks: each entry's chunk_begin (its first chunk, in list order) and
// `aligned` (every pointer it holds 16-byte aligned, a null one counting as aligned:
// 4-element vector accesses), from its pointers and numel; returns the list's chunk count
// (n_chunks).
int64_t adamw_chunk_table(AdamwTensor *tensors, int n_tensors);
// The most blocks a launch of p's kernel (its dtypes and features) can keep resident on the
// current device at once (the grid synchronizes once); a negative value is a CUDA error.
int adamw_max_grid(const AdamwParams &p);
// max_grid: adamw_max_grid(p).
AdamwPlan adamw_plan(const AdamwParams &p, int max_grid);
cudaError_t adamw_launch(const AdamwParams &p, const AdamwPlan &plan, cudaStream_t stream);
