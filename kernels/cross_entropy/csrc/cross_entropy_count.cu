// Cross entropy, the count of a mean: the non-ignored targets, counted on the device by one
// block before the rows kernel (launched as its programmatic dependent).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/reduce.cuh"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"
#include "cross_entropy_row.cuh"

namespace {

// Non-ignored targets, counted by one block (an integer sum). The row kernel, launched
// as its dependent, starts reading logits at once and waits for the count only before
// its gradient.
__global__ void __launch_bounds__(kMaxThreads) ce_count_kernel(CrossEntropyParams p) {
  allow_dependents();
  int c = 0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x)
    c += ce::target_of(p, i) != p.ignore_index;
  const int total = rowsum::block_sum<kMaxThreads / 32>(c);
  if (threadIdx.x == 0) *p.count = total;
}

}  // namespace

cudaError_t ce_job::count(const CrossEntropyParams &p, cudaStream_t stream) {
  ce_count_kernel<<<1, kMaxThreads, 0, stream>>>(p);
  return cudaGetLastError();
}
