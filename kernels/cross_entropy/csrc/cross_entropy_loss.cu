// Cross entropy, the loss of a mean or sum: the per-token losses the rows kernel wrote,
// summed by one block in a fixed order, launched as the rows kernel's programmatic
// dependent. No atomics: the same bits every call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/reduce.cuh"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"

namespace {

// The loss of a mean or sum: the per-token losses summed by one block in a fixed order,
// in double, divided by the non-ignored count for a mean.
__global__ void __launch_bounds__(kMaxThreads) ce_loss_kernel(CrossEntropyParams p) {
  wait_for_primary();
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) acc += double(p.row_loss[i]);
  double total = rowsum::block_sum<kMaxThreads / 32>(acc);
  if (threadIdx.x == 0) {
    if (p.reduction == CeReduction::kMean) total /= double(max(*p.count, 1));
    *p.loss = float(total);
  }
}

}  // namespace

cudaError_t ce_job::loss(const CrossEntropyParams &p, cudaStream_t stream) {
  return launch_dependent(&ce_loss_kernel, dim3(1), dim3(kMaxThreads), stream, p);
}
