// Softmax backward along the last dim with the dropout backward fused, deterministic.
//
// Per row of length N: g = dy * keep * scale (or dy), dot = sum_j g_j y_j,
// dx = y * (g - dot). y, dy (and the 1-byte keep mask) are read once, the dot is one
// row reduction in fp32, dx is rounded once at the store. Reductions are fixed-order
// (per-thread sequential, then a warp xor-butterfly, then the warps' partials summed in
// warp order by every thread): bitwise reproducible, no atomics.
//
// Tiling. A row is cut into chunks of TPR x V elements (TPR threads per row, V = 16 bytes
// of T: 4 fp32 or 8 fp16/bf16); a thread holds C chunks' worth (C 16-byte vectors of y
// and of dy) in registers, so the row is read from memory once and the output computed
// from registers after the reduction.
//  - short rows: one warp per row, 4 rows per 128-thread block; the reduction is warp
//    shuffles only. Vectorized rows of up to 64 vectors (512 16-bit / 256 fp32 elements),
//    C = 1 or 2; scalar rows of up to 32 x 8 vectors, C = 1, 2, 4 or 8.
//  - vectorized rows of 65-1024 vectors (up to 8192 16-bit / 4096 fp32 elements): one
//    block per row, one vector a thread (C = 1) on TPR = 128 ... 1024 threads, <= 32
//    registers, so 2048 threads an SM: many rows in flight per SM at different phases
//    (load, reduce, store), as Liger's Triton kernel runs them (C = 2 rows on 128-512
//    threads, 3 blocks an SM, were slower: BENCHMARKS.md, softmax: ideas dropped).
//    fp32 rows of 1025-2048 vectors at C = 4 on 512 threads, 2 blocks an SM. Split rows,
//    without dropout: bf16 rows of 513-1024 vectors at C = 2 on 512 threads, 4 blocks an
//    SM, the second vector through shared memory (kBlocksSplit); fp32 rows of 1025-2048
//    vectors at C = 4, chunks 2-3 through shared memory, 3 blocks an SM (kBlocksSplitF32).
//  - longer rows: TPR = 128 ... 512, C = 4 or 8, held in registers up to 512 x 8 vectors =
//    16384 fp32 or 32768 fp16/bf16 elements per row (128 KiB of y and dy per block, half
//    the register file). The warps' partial sums meet in shared memory (one __syncthreads)
//    and are summed by a butterfly (up to 4 vectors a thread) or in warp order.
//  - longer rows (32768 fp32, 65536 16-bit and beyond): the first 512 x 8 vectors stay in
//    registers, the rest of the row is streamed twice (pass 1 the dot, pass 2 the output),
//    so only the part that does not fit is read a second time (mostly from L2 for a few
//    rows in flight). Shared memory could hold another ~200 KiB, but only correctness
//    cases use such rows; the perf shapes (N <= 8192) are register-resident.
// Memory access. Vector path (y, dy, dx 16-byte aligned rows, the mask V-byte aligned):
// thread t of the row reads the 16-byte vector (c x TPR + t) of chunk c; a partial last
// vector (N not a multiple of V) is read and written element by element. Scalar path
// (rows not aligned, e.g. N odd): element c x TPR x V + i x TPR + t, coalesced per i.
// The scalar path keeps the same C but at most 256 threads per row (16-bit elements loaded
// one by one need ~160 registers; 512 threads would cap a thread at 128 and spill), so it
// streams from 8192 fp32 / 16384 16-bit elements on.
// The last dimension must be contiguous (the binding checks); row strides are free.
// Offsets are 64-bit (rows x N may exceed 2^31).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "../../common/csrc/alignment.h"
#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/reduce.cuh"
#include "../../common/csrc/row_pipeline.cuh"
#include "../../common/csrc/static_switch.h"
#include "softmax_bwd.h"

namespace {

constexpr int kWarpRows = 4;      // rows (warps) per block of the warp-per-row kernel
constexpr int kMaxChunks = 8;     // C: 16-byte vectors of y and of dy per thread
constexpr int kMaxThreads = 512;  // threads of a C >= 4 block row (16 warp partials)
constexpr int kWarpMaxVecs = 64;  // vectorized rows of more vectors take block rows
// Vectorized rows of 65-1024 vectors: one vector a thread on 128-1024 threads, 2 blocks of
// 1024 an SM at <= 32 registers (C = 2 rows needed 40 registers, or spilled at 4 blocks).
constexpr int kC1Threads = 1024, kBlocksC1 = 2;
// bf16 split rows of 513-1024 vectors without dropout: C = 2 on 512 threads at 4 blocks an
// SM (Liger's tiling), the second vector of y and dy staged in the thread's shared-memory
// slots by cp.async, so that a thread holds one vector in registers (<= 32). fp16 and
// dropout rows keep C = 1: they spilled here, or were slower (BENCHMARKS.md, softmax:
// ideas dropped).
constexpr int kBlocksSplit = 4;
// fp32 rows of 1025-2048 vectors with dropout: C = 4 on 512 threads, 2 blocks an SM at
// <= 64 registers, with the lean block rows below (C = 2 on 1024 threads, one block an SM,
// ran slower and unsteadily).
constexpr int kBlocksC4Fp32 = 2;
// fp32 split rows of 1025-2048 vectors without dropout (softmax_bwd_split_kernel): C = 4
// on 512 threads, chunks 2-3 staged in shared memory, 3 blocks an SM at <= 40 registers
// (the plain C = 4 kernel spilled at 3 blocks and was slower).
constexpr int kBlocksSplitF32 = 3;
// Scalar block rows: 16-bit elements loaded one by one sit in a register each until
// packed, so a thread needs up to ~160 registers there (512 threads would cap it at 128)
constexpr int kMaxThreadsScalar = 256;

// V = 16 / sizeof(T) elements in one 16-byte word
template <typename T> struct Vec {
  static constexpr int V = 16 / sizeof(T);
  union {
    uint4 raw;
    T e[16 / sizeof(T)];
  };
};

// the V keep bytes of one vector: 4 bytes (fp32) or 8 (16-bit)
template <int V> struct MaskBits;
template <> struct MaskBits<4> { using type = uint32_t; };
template <> struct MaskBits<8> { using type = uint2; };
template <int V> struct MaskVec {
  union {
    typename MaskBits<V>::type raw;
    uint8_t b[V];
  };
};

// Chunk starting at row element `base`: this thread's V elements of y, dy (and the mask);
// elements at or past n read as zeros.
template <typename T, bool kVec, bool kDrop, typename Idx>
__device__ __forceinline__ void load_chunk(const T *__restrict__ y, const T *__restrict__ dy,
                                           const uint8_t *__restrict__ mk, Idx base,
                                           int tid, int tpr, Idx n, Vec<T> &yv,
                                           Vec<T> &dv, MaskVec<Vec<T>::V> &mv) {
  constexpr int V = Vec<T>::V;
  using MaskT = typename MaskBits<V>::type;
  if (kVec) {
    const Idx e0 = base + Idx(tid) * V;
    if (e0 + V <= n) {
      yv.raw = __ldg(reinterpret_cast<const uint4 *>(y + e0));
      dv.raw = __ldg(reinterpret_cast<const uint4 *>(dy + e0));
      if (kDrop) mv.raw = __ldg(reinterpret_cast<const MaskT *>(mk + e0));
      return;
    }
    yv.raw = make_uint4(0u, 0u, 0u, 0u);
    dv.raw = make_uint4(0u, 0u, 0u, 0u);
    if (kDrop) mv.raw = MaskT{};
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if (e0 + i < n) {
        yv.e[i] = y[e0 + i];
        dv.e[i] = dy[e0 + i];
        if (kDrop) mv.b[i] = mk[e0 + i];
      }
    }
  } else {
    yv.raw = make_uint4(0u, 0u, 0u, 0u);
    dv.raw = make_uint4(0u, 0u, 0u, 0u);
    if (kDrop) mv.raw = MaskT{};
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const Idx e = base + Idx(i) * tpr + tid;
      if (e < n) {
        yv.e[i] = y[e];
        dv.e[i] = dy[e];
        if (kDrop) mv.b[i] = mk[e];
      }
    }
  }
}

// Dropped elements of dy become +0, so that g = dy * scale afterwards equals
// dy * keep * scale (the golden's form) without keeping the mask in registers.
template <typename T>
__device__ __forceinline__ void apply_mask(Vec<T> &dv, const MaskVec<Vec<T>::V> &mv) {
#pragma unroll
  for (int i = 0; i < Vec<T>::V; ++i)
    if (mv.b[i] == 0) dv.e[i] = from_f<T>(0.f);
}

template <typename T, bool kDrop>
__device__ __forceinline__ float grad(T d, float scale) {
  return kDrop ? to_f<T>(d) * scale : to_f<T>(d);
}

// sum of g * y over the vector, in element order, onto acc
template <typename T, bool kDrop>
__device__ __forceinline__ float dot_vec(const Vec<T> &yv, const Vec<T> &dv, float scale,
                                         float acc) {
#pragma unroll
  for (int i = 0; i < Vec<T>::V; ++i)
    acc = fmaf(grad<T, kDrop>(dv.e[i], scale), to_f<T>(yv.e[i]), acc);
  return acc;
}

// dx = y * (g - dot) of one vector, rounded once
template <typename T, bool kDrop>
__device__ __forceinline__ void dx_vec(const Vec<T> &yv, const Vec<T> &dv, float scale,
                                       float dot, Vec<T> &o) {
#pragma unroll
  for (int i = 0; i < Vec<T>::V; ++i)
    o.e[i] = from_f<T>(to_f<T>(yv.e[i]) * (grad<T, kDrop>(dv.e[i], scale) - dot));
}

// dx of the chunk at `base`, elements past n not written
template <typename T, bool kVec, bool kDrop, typename Idx>
__device__ __forceinline__ void store_chunk(T *__restrict__ dx, Idx base, int tid, int tpr,
                                            Idx n, const Vec<T> &yv, const Vec<T> &dv,
                                            float scale, float dot) {
  constexpr int V = Vec<T>::V;
  Vec<T> o;
  dx_vec<T, kDrop>(yv, dv, scale, dot, o);
  if (kVec) {
    const Idx e0 = base + Idx(tid) * V;
    if (e0 + V <= n) {
      *reinterpret_cast<uint4 *>(dx + e0) = o.raw;
      return;
    }
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (e0 + i < n) dx[e0 + i] = o.e[i];
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const Idx e = base + Idx(i) * tpr + tid;
      if (e < n) dx[e] = o.e[i];
    }
  }
}

// Fixed-order row sum. The xor butterfly leaves the same bits in every lane (each step
// adds the same two values, in either order). Block: warp w's sum goes to part[w]; then
// every warp sums the partials by the same butterfly (kTree: 5 dependent steps), or every
// thread adds part[0], part[1], ... in that order.
template <bool kWarp, bool kTree>
__device__ __forceinline__ float row_sum(float v) {
  v = rowsum::warp_sum(v);
  if (kWarp) return v;
  __shared__ float part[kC1Threads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  const int nw = blockDim.x / 32;
  if (kTree) return rowsum::partials_sum(part, nw, lane);
  float s = 0.f;
  for (int w = 0; w < nw; ++w) s += part[w];
  return s;
}

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

// Split rows (plan.split; vectorized, no dropout): bf16 at C = 2, fp32 at C = 4.
template <typename T>
cudaError_t launch_split(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan, cudaStream_t s) {
  if (!plan.vectorized || p.dropout || plan.streamed || plan.warp_per_row ||
      plan.block.x != unsigned(kMaxThreads))
    return cudaErrorInvalidValue;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (plan.chunks != 2) return cudaErrorInvalidValue;
    softmax_bwd_split_kernel<T, 1, 1, kBlocksSplit, true><<<plan.grid, plan.block, 0, s>>>(p);
  } else if constexpr (std::is_same_v<T, float>) {
    if (plan.chunks != 4) return cudaErrorInvalidValue;
    softmax_bwd_split_kernel<T, 2, 2, kBlocksSplitF32, false><<<plan.grid, plan.block, 0, s>>>(p);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// The other kernels a plan can ask for (softmax_bwd_plan): vectorized warp rows hold at
// most kWarpMaxVecs vectors (C <= 2), vectorized block rows take C = 1 or >= 4 (C = 2 only
// as split rows, launch_split), scalar block rows C >= 4.
template <typename T, int C, bool kWarp, bool kStream>
cudaError_t launch_variant(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan, cudaStream_t s) {
  static constexpr bool kVecPlanned = kWarp ? C <= 2 : true;
  static constexpr bool kScalarPlanned = kWarp || C >= 4;
  return BOOL_SWITCH(plan.vectorized, kVec, [&] {
    if constexpr (kVec ? kVecPlanned : kScalarPlanned) {
      BOOL_SWITCH(p.dropout, kDrop, [&] {
        softmax_bwd_kernel<T, C, kWarp, kVec, kDrop, kStream>
            <<<plan.grid, plan.block, 0, s>>>(p);
      });
      return cudaSuccess;
    } else {
      return cudaErrorInvalidValue;
    }
  });
}

// The row kernels of a plan, for y's dtype T (instantiated for every dtype at the end).
template <typename T>
cudaError_t launch_rows(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan, cudaStream_t s) {
  cudaError_t err;
  if (plan.split) {
    err = launch_split<T>(p, plan, s);
  } else if (plan.warp_per_row) {
    err = INT_SWITCH(plan.chunks, C, (1, 2, 4, 8), [&] {
      return launch_variant<T, C, true, false>(p, plan, s);
    });
  } else if (plan.streamed) {
    if (plan.chunks != kMaxChunks) return cudaErrorInvalidValue;
    err = launch_variant<T, kMaxChunks, false, true>(p, plan, s);
  } else {  // C = 2 block rows are split rows (above)
    err = INT_SWITCH(plan.chunks, C, (1, 4, 8), [&] {
      return launch_variant<T, C, false, false>(p, plan, s);
    });
  }
  return err != cudaSuccess ? err : cudaGetLastError();
}

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

cudaError_t softmax_bwd_launch(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan,
                               cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  return DTYPE_SWITCH(p.dtype, T, [&] { return launch_rows<T>(p, plan, stream); });
}

namespace {
template cudaError_t launch_rows<float>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t launch_rows<__half>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
template cudaError_t launch_rows<__nv_bfloat16>(const SoftmaxBwdParams &, const SoftmaxBwdPlan &, cudaStream_t);
}  // namespace
