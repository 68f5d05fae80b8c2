// The job of the AdamW step (adamw_step.cu, which ends with the instantiations it
// compiles), as the host launch code calls it, and the block size that the plan shares
// with its kernel. No device code: the host planning includes it.
#pragma once

#include <cuda_runtime.h>

#include "adamw.h"

constexpr int kThreads = 256;  // threads of a block

namespace adamw_job {

// The step of P parameters and G gradients (G float or P), kMaster: fp32 master weights,
// kAms: amsgrad, on the plan's grid (adamw_step.cu).
template <typename P, typename G, bool kMaster, bool kAms>
cudaError_t step(const AdamwParams &p, const AdamwPlan &plan, cudaStream_t stream);
// The most blocks of that kernel resident at once on the current device, into *grid.
template <typename P, typename G, bool kMaster, bool kAms>
cudaError_t max_grid(int *grid);

}  // namespace adamw_job
