// Which cuBLASLt algorithm a GEMM runs: the heuristic's first, or the fastest of its first
// `candidates` timed on the GEMM's own operands once per shape and kept for the process
// (what PyTorch's TunableOp does for its GEMMs). Host code only; nothing throws.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "linear_bwd_launch.h"

namespace linear_bwd {

// One cublasLtMatmul as described (alpha 1, beta 0, D in place of C): what a candidate
// runs when it is timed.
struct MatmulCall {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, d_layout = nullptr;
  const void *a = nullptr, *b = nullptr;
  void *d = nullptr;
  void *workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

cublasStatus_t run_matmul(const MatmulCall &call, const cublasLtMatmulAlgo_t &algo);

// The algorithm to run and how it was chosen. `key` names everything the choice depends
// on (the GEMM's description, alignments, workspace, device); `what` words the GEMM for a
// refusal. With candidates <= 1 the heuristic's first result, asked on every call (no
// cache); otherwise the cached choice, or its candidates timed now (each run once, then
// kTimedRuns times between events; the median) and the fastest kept. A stream being
// captured into a CUDA graph is never timed: the heuristic's first, not cached.
Status choose_algo(const MatmulCall &call, cublasLtMatmulPreference_t pref,
                   const std::string &key, const std::string &what, int candidates,
                   cublasLtMatmulHeuristicResult_t *chosen, std::string *how);

}  // namespace linear_bwd
