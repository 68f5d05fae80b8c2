// Causal conv1d backward, second stage: dweight and dbias. The main kernel wrote partial
// sums, ws[part][dim][width + 1] (a part: one batch's row span or block of segments); a
// thread adds one (channel, tap) over the parts in order and rounds once to the weights'
// dtype.
// No atomics: the results are bitwise reproducible. Launched as a programmatic dependent
// of the main kernel (or dinit), so that its launch overlaps their last blocks (a plain
// launch measured slower: docs/benchmark-history.md).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/dependent_launch.cuh"
#include "conv1d_bwd_launchers.h"

namespace {

template <typename W>
__global__ void conv1d_bwd_reduce(const ConvBwdParams p, const int parts) {
  wait_for_primary();  // launched as a programmatic dependent of the main kernel (or dinit)
  const int K = p.width;
  const int64_t n = int64_t(p.dim) * (K + 1);
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  float s = 0.f;
  for (int r = 0; r < parts; ++r) s += p.ws[r * n + idx];  // fixed order
  const int c = int(idx / (K + 1)), k = int(idx % (K + 1));
  if (k < K) {
    static_cast<W *>(p.dweight)[c * p.dw_d + k * p.dw_k] = from_f<W>(s);
  } else if (p.has_bias) {
    static_cast<W *>(p.dbias)[c * p.dbias_d] = from_f<W>(s);
  }
}

}  // namespace

template <typename W>
cudaError_t conv1d_bwd::reduce(const ConvBwdParams &p, int parts, cudaStream_t stream) {
  const int64_t n = int64_t(p.dim) * (p.width + 1);
  const dim3 grid(unsigned((n + 255) / 256)), block(256);
  return launch_dependent(conv1d_bwd_reduce<W>, grid, block, stream, p, parts);
}

template cudaError_t conv1d_bwd::reduce<float>(const ConvBwdParams &, int, cudaStream_t);
template cudaError_t conv1d_bwd::reduce<__half>(const ConvBwdParams &, int, cudaStream_t);
template cudaError_t conv1d_bwd::reduce<__nv_bfloat16>(const ConvBwdParams &, int, cudaStream_t);
