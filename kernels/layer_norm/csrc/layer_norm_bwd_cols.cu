// LayerNorm backward, second stage: dgamma and dbeta. The row kernels' blocks wrote their
// groups' column sums of dy * xhat and dy, added in group order, into one workspace row
// each, ws[block][2][np] (np: N rounded up to 8); ln_bwd_cols sums the rows in a fixed
// order and rounds once to gamma's dtype. No atomics: the results are bitwise
// reproducible for a given device (the grid depends on the SM count). Launched as a
// programmatic dependent of the row kernel, so that its launch overlaps the last rows (a
// plain launch measured slower: docs/benchmark-history.md).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/dependent_launch.cuh"
#include "layer_norm_bwd_kernels.cuh"
#include "layer_norm_bwd_launchers.h"

namespace {

// Second stage: dgamma (blockIdx.y 0) and dbeta (1) of 32 columns a block from the
// workspace rows [parts][2][np]. Thread (slice s, 4 columns) sums parts s, s + 32, ... in
// order as float4s, its loads kColsBatch at a time (one round of L2 latency for up to
// 32 * kColsBatch parts); then each warp sums 4 slices in order and one warp the 8 warps'
// sums in order. It runs after the main kernel's last row, so its latency is the op's: one
// round of loads beats slices of scalar loads a few at a time, and batches of 8 beat
// batches of 4 (docs/benchmark-history.md).
constexpr int kRedCols = 32, kRedSlices = 32, kColsBatch = 8;
constexpr int kColsThreads = kRedCols / 4 * kRedSlices;

template <typename W>
__global__ void __launch_bounds__(kColsThreads)
ln_bwd_cols(const LnBwdParams p, const int parts) {
  __shared__ float4 sh[kRedSlices][kRedCols / 4];
  __shared__ float warp_sums[kColsThreads / 32][kRedCols];
  // launched as a programmatic dependent of the main kernel: wait until its writes (the
  // workspace) are complete and visible
  wait_for_primary();
  const int q = threadIdx.x % (kRedCols / 4), slice = threadIdx.x / (kRedCols / 4);
  const int which = blockIdx.y;
  const int n = p.n, np = round_up(n, 8);
  // np is a multiple of 8, so col0 + 3 < np; columns n .. np - 1 of a workspace row hold
  // no column's sums (unwritten, or what a block's staged rows held there): their sums are
  // formed and dropped
  const int col0 = blockIdx.x * kRedCols + q * 4;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (col0 < n) {
    const float4 *w = reinterpret_cast<const float4 *>(p.ws + int64_t(which) * np + col0);
    const int64_t step = int64_t(np) / 2;  // float4s from one part's row to the next
    for (int r0 = slice; r0 < parts; r0 += kRedSlices * kColsBatch) {
      float4 v[kColsBatch];
#pragma unroll
      for (int k = 0; k < kColsBatch; ++k) {
        const int r = r0 + k * kRedSlices;
        if (r < parts) v[k] = w[int64_t(r) * step];
      }
#pragma unroll
      for (int k = 0; k < kColsBatch; ++k) {
        if (r0 + k * kRedSlices < parts) add4(s, v[k]);
      }
    }
  }
  sh[slice][q] = s;
  __syncthreads();
  const float *shf = reinterpret_cast<const float *>(sh);  // [slice][32 columns]
  const int c = threadIdx.x % kRedCols, wp = threadIdx.x / kRedCols;
  constexpr int kPerWarp = kRedSlices / (kColsThreads / 32);
  float t = 0.f;
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) t += shf[(wp * kPerWarp + i) * kRedCols + c];
  warp_sums[wp][c] = t;
  __syncthreads();
  const int col = blockIdx.x * kRedCols + c;
  if (wp == 0 && col < n) {
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < kColsThreads / 32; ++k) total += warp_sums[k][c];
    static_cast<W *>(which ? p.dbeta : p.dgamma)[col] = from_f<W>(total);
  }
}

}  // namespace

template <typename W>
cudaError_t ln_bwd::cols(const LnBwdParams &p, int parts, cudaStream_t stream) {
  const dim3 grid(unsigned((p.n + kRedCols - 1) / kRedCols), 2), block(kColsThreads);
  return launch_dependent(ln_bwd_cols<W>, grid, block, stream, p, parts);
}

template cudaError_t ln_bwd::cols<float>(const LnBwdParams &, int, cudaStream_t);
template cudaError_t ln_bwd::cols<__half>(const LnBwdParams &, int, cudaStream_t);
template cudaError_t ln_bwd::cols<__nv_bfloat16>(const LnBwdParams &, int, cudaStream_t);
