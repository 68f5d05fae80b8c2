// Softmax backward along the last dim with the dropout backward fused: which kernel and
// tiling a problem gets (host code only).
//
// Tiling. A row is cut into chunks of TPR x V elements (TPR threads per row, V = 16 bytes
// of T: 4 fp32 or 8 fp16/bf16); a thread holds C chunks' worth (C 16-byte vectors of y
// and of dy) in registers, so the row is read from memory once and the output computed
// from registers after the reduction.
//  - short rows: one warp per row, 4 rows per 128-thread block; the reduction is warp
//    shuffles only. Vectorized rows of up to 64 vectors (512 16-bit / 256 fp32 elements),
//    C = 1 or 2; scalar rows of up to 32 x 8 vectors, C = 1, 2, 4 or 8
//    (softmax_bwd_rows.cu).
//  - vectorized rows of 65-1024 vectors (up to 8192 16-bit / 4096 fp32 elements): one
//    block per row, one vector a thread (C = 1) on TPR = 128 ... 1024 threads, <= 32
//    registers, so 2048 threads an SM: many rows in flight per SM at different phases
//    (load, reduce, store), as Liger's Triton kernel runs them (C = 2 rows on 128-512
//    threads, 3 blocks an SM, were slower: BENCHMARKS.md, softmax: ideas dropped).
//    fp32 rows of 1025-2048 vectors at C = 4 on 512 threads, 2 blocks an SM. Split rows,
//    without dropout (softmax_bwd_split.cu): bf16 rows of 513-1024 vectors at C = 2 on 512
//    threads, 4 blocks an SM, the second vector through shared memory (kBlocksSplit); fp32
//    rows of 1025-2048 vectors at C = 4, chunks 2-3 through shared memory, 3 blocks an SM
//    (kBlocksSplitF32).
//  - longer rows: TPR = 128 ... 512, C = 4 or 8, held in registers up to 512 x 8 vectors =
//    16384 fp32 or 32768 fp16/bf16 elements per row (128 KiB of y and dy per block, half
//    the register file). The warps' partial sums meet in shared memory (one __syncthreads)
//    and are summed by a butterfly (up to 4 vectors a thread) or in warp order.
//  - longer rows (32768 fp32, 65536 16-bit and beyond): the first 512 x 8 vectors stay in
//    registers, the rest of the row is streamed twice (pass 1 the dot, pass 2 the output),
//    so only the part that does not fit is read a second time (mostly from L2 for a few
//    rows in flight). Shared memory could hold another ~200 KiB, but only correctness
//    cases use such rows; the perf shapes (N <= 8192) are register-resident.
// The scalar path (rows not 16-byte aligned, e.g. N odd) keeps the same C but at most 256
// threads per row (16-bit elements loaded one by one need ~160 registers; 512 threads
// would cap a thread at 128 and spill), so it streams from 8192 fp32 / 16384 16-bit
// elements on.

#include <algorithm>
#include <cstdint>

#include "../../common/csrc/alignment.h"
#include "softmax_bwd.h"
#include "softmax_bwd_launchers.h"

namespace {

int pow2_ceil(int64_t v) {
  int c = 1;
  while (c < v) c *= 2;
  return c;
}

}  // namespace

SoftmaxBwdPlan softmax_bwd_plan(const SoftmaxBwdParams &p) {
  SoftmaxBwdPlan plan{};
  const int es = elem_size(p.dtype);
  const int V = 16 / es;
  const int64_t nv = (int64_t(p.n) + V - 1) / V;  // 16-byte vectors per row
  // a row's start is aligned when the base is and every row stride is a multiple of V
  // (irrelevant with one row)
  const bool rows_aligned =
      p.rows <= 1 || (p.y_row % V == 0 && p.dy_row % V == 0 && p.dx_row % V == 0 &&
                      (!p.dropout || p.mask_row % V == 0));
  plan.vectorized = rows_aligned && aligned(p.y, 16) && aligned(p.dy, 16) && aligned(p.dx, 16) &&
                    (!p.dropout || aligned(p.mask, V));
  if (nv <= (plan.vectorized ? kWarpMaxVecs : 32 * kMaxChunks)) {
    plan.warp_per_row = true;
    plan.chunks = pow2_ceil((nv + 31) / 32);
    plan.grid = dim3(unsigned((p.rows + kWarpRows - 1) / kWarpRows));
    plan.block = dim3(32 * kWarpRows);
  } else {
    int tpr;
    if (plan.vectorized && p.dtype == DType::kBFloat16 && !p.dropout && nv > kMaxThreads &&
        nv <= 2 * kMaxThreads) {
      tpr = kMaxThreads;  // C = 2, the second vector through shared memory
      plan.chunks = 2;
      plan.split = true;
    } else if (plan.vectorized && nv <= kC1Threads) {  // C = 1, as many threads as needed
      tpr = pow2_ceil(nv);
      plan.chunks = 1;
    } else if (plan.vectorized && es == 4 && nv <= 4 * kMaxThreads) {  // fp32: C = 4
      tpr = std::max(128, pow2_ceil((nv + 3) / 4));
      plan.chunks = 4;
      // without dropout, chunks 2-3 through shared memory (their register chunks 0-1,
      // 2 x 512 vectors, whole: rows of up to 1024 vectors took C = 1 above)
      plan.split = !p.dropout && nv > 2 * kMaxThreads;
    } else {
      const int max_tpr = plan.vectorized ? kMaxThreads : kMaxThreadsScalar;
      tpr = nv <= 128 * kMaxChunks ? 128 : nv <= 256 * kMaxChunks ? 256 : max_tpr;
      const int64_t need = (nv + tpr - 1) / tpr;
      plan.streamed = need > kMaxChunks;
      plan.chunks = plan.streamed ? kMaxChunks : std::max(4, pow2_ceil(need));
    }
    plan.grid = dim3(unsigned(p.rows));
    plan.block = dim3(tpr);
  }
  return plan;
}
