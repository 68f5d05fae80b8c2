// Softmax backward, split rows (softmax_bwd_split_kernel): vectorized rows without dropout
// a little longer than the block rows hold in registers at their occupancy. bf16 rows of
// 513-1024 vectors at C = 2 on 512 threads, 4 blocks an SM, the second vector through
// shared memory (kBlocksSplit); fp32 rows of 1025-2048 vectors at C = 4, chunks 2-3 through
// shared memory, 3 blocks an SM (kBlocksSplitF32).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../../common/csrc/row_pipeline.cuh"
#include "softmax_bwd_kernels.cuh"
#include "softmax_bwd_launchers.h"

namespace {

// Split rows, vectorized and without dropout (the plan): one block of kMaxThreads per row,
// C = kRegs + kStaged. Chunks kRegs.. go to the thread's shared-memory slots by cp.async,
// issued first so that their latency overlaps the register loads of chunks 0..kRegs-1, and
// are read from there again for the store (held in registers across the reduction they
// cost a block an SM). The dot is summed in chunk order, as softmax_bwd_kernel sums it.
// The plan sends rows of more than kMaxThreads x kRegs vectors here: the register chunks
// are whole vectors, stored without tail checks. kCheckedLoads only picks the code ptxas
// fits in the registers of kBlocks an SM (sm_90): bf16 spilled 12 bytes with unchecked
// loads, fp32 4 bytes with checked ones.
//  - bf16 rows of 513-1024 vectors: <1, 1, kBlocksSplit, checked>;
//  - fp32 rows of 1025-2048 vectors: <2, 2, kBlocksSplitF32, unchecked>.
template <typename T, int kRegs, int kStaged, int kBlocks, bool kCheckedLoads>
__global__ void __launch_bounds__(kMaxThreads, kBlocks)
softmax_bwd_split_kernel(const SoftmaxBwdParams p) {
  constexpr int V = Vec<T>::V;
  __shared__ uint4 stage[kStaged][2][kMaxThreads];
  const int tid = int(threadIdx.x), tpr = int(blockDim.x);
  const int64_t row = blockIdx.x;
  const int n = p.n, chunk = tpr * V;  // 32-bit offsets within the row (lean rows)
  const T *y = static_cast<const T *>(p.y) + row * p.y_row;
  const T *dy = static_cast<const T *>(p.dy) + row * p.dy_row;
  T *dx = static_cast<T *>(p.dx) + row * p.dx_row;
  // slot (s, 0) y's, (s, 1) dy's: constant offsets from this thread's first slot
  const unsigned slots = rowpipe::smem_addr(&stage[0][0][tid]);
  auto slot = [&](int s, int k) { return slots + unsigned((2 * s + k) * kMaxThreads * 16); };
#pragma unroll
  for (int s = 0; s < kStaged; ++s) {
    const int e = (kRegs + s) * chunk + tid * V;
    const int b = rowpipe::bytes_before(e, n, V, int(sizeof(T)));
    rowpipe::cp_async16(slot(s, 0), b ? y + e : y, b);
    rowpipe::cp_async16(slot(s, 1), b ? dy + e : dy, b);
  }
  rowpipe::cp_async_commit();
  Vec<T> yr[kRegs], dr[kRegs];
  MaskVec<V> unused;
#pragma unroll
  for (int c = 0; c < kRegs; ++c) {
    if constexpr (kCheckedLoads) {
      load_chunk<T, true, false>(y, dy, nullptr, c * chunk, tid, tpr, n, yr[c], dr[c], unused);
    } else {
      yr[c].raw = __ldg(reinterpret_cast<const uint4 *>(y + c * chunk + tid * V));
      dr[c].raw = __ldg(reinterpret_cast<const uint4 *>(dy + c * chunk + tid * V));
    }
  }
  float dot = 0.f;
#pragma unroll
  for (int c = 0; c < kRegs; ++c) dot = dot_vec<T, false>(yr[c], dr[c], 1.f, dot);
  rowpipe::cp_async_wait<0>();  // this thread's own copies: no barrier needed
  auto staged = [&](int s, Vec<T> &ys, Vec<T> &ds) {
    ys.raw = rowpipe::lds16(slot(s, 0));
    ds.raw = rowpipe::lds16(slot(s, 1));
  };
#pragma unroll
  for (int s = 0; s < kStaged; ++s) {
    Vec<T> ys, ds;
    staged(s, ys, ds);
    dot = dot_vec<T, false>(ys, ds, 1.f, dot);
  }
  dot = row_sum<false, true>(dot);
#pragma unroll
  for (int c = 0; c < kRegs; ++c) {  // whole vectors (the plan's row lengths): no tail checks
    Vec<T> o;
    dx_vec<T, false>(yr[c], dr[c], 1.f, dot, o);
    *reinterpret_cast<uint4 *>(dx + c * chunk + tid * V) = o.raw;
  }
#pragma unroll
  for (int s = 0; s < kStaged; ++s) {
    Vec<T> ys, ds;
    staged(s, ys, ds);
    store_chunk<T, true, false>(dx, (kRegs + s) * chunk, tid, tpr, n, ys, ds, 1.f, dot);
  }
}

}  // namespace

// Split rows (plan.split; vectorized, no dropout): bf16 at C = 2, fp32 at C = 4.
template <typename T>
cudaError_t sm_bwd::split(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan,
                          cudaStream_t stream) {
  if (!plan.vectorized || p.dropout || plan.streamed || plan.warp_per_row ||
      plan.block.x != unsigned(kMaxThreads))
    return cudaErrorInvalidValue;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (plan.chunks != 2) return cudaErrorInvalidValue;
    softmax_bwd_split_kernel<T, 1, 1, kBlocksSplit, true>
        <<<plan.grid, plan.block, 0, stream>>>(p);
  } else if constexpr (std::is_same_v<T, float>) {
    if (plan.chunks != 4) return cudaErrorInvalidValue;
    softmax_bwd_split_kernel<T, 2, 2, kBlocksSplitF32, false>
        <<<plan.grid, plan.block, 0, stream>>>(p);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template cudaError_t sm_bwd::split<float>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::split<__half>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::split<__nv_bfloat16>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
