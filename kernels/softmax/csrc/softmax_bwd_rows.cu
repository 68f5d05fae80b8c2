// Softmax backward with the dropout backward fused: the warp rows and the block rows
// (softmax_bwd_kernel). A row is cut into chunks of TPR x V elements (TPR threads a row,
// V = 16 bytes of T: 4 fp32 or 8 fp16/bf16); a thread holds C chunks' worth (C 16-byte
// vectors of y and of dy) in registers, so the row is read from memory once and dx
// computed from registers after the reduction. Rows longer than 512 x 8 vectors keep the
// first 512 x 8 in registers and stream the rest twice (pass 1 the dot, pass 2 dx), so
// only the part that does not fit is read a second time (mostly from L2 for a few rows in
// flight). The dot is summed per thread in chunk order, then by the warp's xor butterfly,
// then over the warps of a block row in a fixed order (softmax_bwd_kernels.cuh): bitwise
// reproducible, no atomics.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../../common/csrc/static_switch.h"
#include "softmax_bwd_kernels.cuh"
#include "softmax_bwd_launchers.h"

namespace {

// kWarp: one warp per row (TPR 32), kWarpRows rows per block; else one block per row
// (TPR blockDim.x). C chunks per thread in registers; kStream: chunks past C streamed
// twice (block kernel with C = kMaxChunks only).
template <typename T, int C, bool kWarp, bool kVec, bool kDrop, bool kStream>
__global__ void __launch_bounds__(kWarp ? 32 * kWarpRows
                                  : !kVec ? kMaxThreadsScalar : C == 1 ? kC1Threads : kMaxThreads,
                                  !kWarp && kVec && C == 1 ? kBlocksC1
                                  : !kWarp && kVec && C == 4 && sizeof(T) == 4 ? kBlocksC4Fp32
                                  : 1)
softmax_bwd_kernel(const SoftmaxBwdParams p) {
  constexpr int V = Vec<T>::V;
  const int tpr = kWarp ? 32 : int(blockDim.x);
  const int tid = kWarp ? int(threadIdx.x % 32) : int(threadIdx.x);
  const int64_t row =
      kWarp ? int64_t(blockIdx.x) * kWarpRows + threadIdx.x / 32 : int64_t(blockIdx.x);
  if (kWarp && row >= p.rows) return;  // the whole warp: no shuffles left behind
  // Lean block rows (up to 4 vectors a thread, held whole): 32-bit offsets within the row
  // and the warp partials summed by a butterfly (fp32 rows needed both to reach Liger's
  // speed). Warp rows keep 64-bit offsets (32-bit ones were slower) and so do C = 8 rows
  // (the 16-bit one spills at its 128-register cap with them).
  constexpr bool kLean = !kWarp && !kStream && C <= 4;
  using Idx = std::conditional_t<kLean, int, int64_t>;
  const Idx n = Idx(p.n);
  const Idx chunk = Idx(tpr) * V;  // row elements per chunk
  const float scale = p.scale;

  const T *y = static_cast<const T *>(p.y) + row * p.y_row;
  const T *dy = static_cast<const T *>(p.dy) + row * p.dy_row;
  const uint8_t *mk = kDrop ? p.mask + row * p.mask_row : nullptr;
  T *dx = static_cast<T *>(p.dx) + row * p.dx_row;

  Vec<T> yv[C], dv[C];
  {
    MaskVec<V> mv[C];
#pragma unroll
    for (int c = 0; c < C; ++c)
      load_chunk<T, kVec, kDrop>(y, dy, mk, c * chunk, tid, tpr, n, yv[c], dv[c], mv[c]);
    if (kDrop) {
#pragma unroll
      for (int c = 0; c < C; ++c) apply_mask<T>(dv[c], mv[c]);
    }
  }
  float dot = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) dot = dot_vec<T, kDrop>(yv[c], dv[c], scale, dot);

  const Idx nchunks = (n + chunk - 1) / chunk;
  if (kStream) {  // pass 1 over the rest: two chunks in flight per step
    for (Idx c = C; c < nchunks; c += 2) {
      Vec<T> ys[2], ds[2];
      MaskVec<V> ms[2];
#pragma unroll
      for (int u = 0; u < 2; ++u)
        load_chunk<T, kVec, kDrop>(y, dy, mk, (c + u) * chunk, tid, tpr, n, ys[u], ds[u], ms[u]);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (kDrop) apply_mask<T>(ds[u], ms[u]);
        dot = dot_vec<T, kDrop>(ys[u], ds[u], scale, dot);
      }
    }
  }

  dot = row_sum<kWarp, kLean>(dot);

#pragma unroll
  for (int c = 0; c < C; ++c)
    store_chunk<T, kVec, kDrop>(dx, c * chunk, tid, tpr, n, yv[c], dv[c], scale, dot);

  if (kStream) {  // pass 2 over the rest: read again (mostly from L2), write dx
    for (Idx c = C; c < nchunks; c += 2) {
      Vec<T> ys[2], ds[2];
      MaskVec<V> ms[2];
#pragma unroll
      for (int u = 0; u < 2; ++u)
        load_chunk<T, kVec, kDrop>(y, dy, mk, (c + u) * chunk, tid, tpr, n, ys[u], ds[u], ms[u]);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (kDrop) apply_mask<T>(ds[u], ms[u]);
        store_chunk<T, kVec, kDrop>(dx, (c + u) * chunk, tid, tpr, n, ys[u], ds[u], scale, dot);
      }
    }
  }
}

}  // namespace

// The kernels the plan can ask for (softmax_bwd_plan): vectorized warp rows hold at most
// kWarpMaxVecs vectors (C <= 2), vectorized block rows take C = 1 or >= 4 (C = 2 only as
// split rows, softmax_bwd_split.cu), scalar block rows C >= 4.
template <typename T, int C, bool kWarp, bool kStream>
cudaError_t sm_bwd::rows(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan,
                         cudaStream_t stream) {
  static constexpr bool kVecPlanned = kWarp ? C <= 2 : true;
  static constexpr bool kScalarPlanned = kWarp || C >= 4;
  return BOOL_SWITCH(plan.vectorized, kVec, [&] {
    if constexpr (kVec ? kVecPlanned : kScalarPlanned) {
      BOOL_SWITCH(p.dropout, kDrop, [&] {
        softmax_bwd_kernel<T, C, kWarp, kVec, kDrop, kStream>
            <<<plan.grid, plan.block, 0, stream>>>(p);
      });
      return cudaGetLastError();
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

template cudaError_t sm_bwd::rows<float, 1, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 2, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 4, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 8, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 1, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 4, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 8, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<float, 8, false, true>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 1, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 2, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 4, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 8, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 1, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 4, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 8, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__half, 8, false, true>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 1, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 2, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 4, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 8, true, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 1, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 4, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 8, false, false>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t sm_bwd::rows<__nv_bfloat16, 8, false, true>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
