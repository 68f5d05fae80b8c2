// Rows streamed through shared memory with cp.async, for row-wise backward kernels (the
// LayerNorm backward's vectorized rows).
//
// Why. A memory-bound row kernel that loads into registers has at most one row per thread
// in flight, and stalls on it at every row's reduction: the LayerNorm backward ran well
// below the copy bandwidth that way (docs/benchmark-history.md). Here a row group of TPR
// threads walks rows r, r + stride, ... (a persistent grid) and keeps the next kStages - 1
// rows in flight as cp.async copies into a shared-memory ring while it reduces and stores
// the current one. (The softmax backward, one light pass a row, measured slower on the
// ring than one block a row loading into registers: BENCHMARKS.md, softmax: ideas
// dropped.) The tiling the host shares is in row_tiling.h.
//
// Ownership. Each thread copies and later reads only its own 16-byte slots, so no barrier
// guards them: cp.async.wait_group makes a thread's completed copies visible to that
// thread. The one 8-byte slot per warp (a row's statistics) is copied by lane 0 and read by
// the warp after __syncwarp. A stage is rewritten one row after it was read, by the same
// thread (warp slot: the same warp, past its row reduction's shuffles).
#pragma once

#include <cstddef>
#include <cstdint>

#include "reduce.cuh"
#include "row_tiling.h"

namespace rowpipe {

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, L2 only (streamed data); src_bytes < 16 zero-fills the rest
// (0: nothing is read).
__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// kBytes (4 or 8) global -> shared, zero-filled past src_bytes.
template <int kBytes>
__device__ __forceinline__ void cp_async_small(unsigned dst, const void *src, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca takes 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src),
               "n"(kBytes), "r"(src_bytes)
               : "memory");
}

// kBytes (4, 8 or 16) global -> shared, zero-filled past src_bytes: 16 through L2 only
// (cp_async16), 4 and 8 through L1 (cp_async_small: cp.async.cg takes 16 bytes alone).
template <int kBytes>
__device__ __forceinline__ void cp_async(unsigned dst, const void *src, int src_bytes) {
  if constexpr (kBytes == 16) cp_async16(dst, src, src_bytes);
  else cp_async_small<kBytes>(dst, src, src_bytes);
}

// Loads from 32-bit shared-window addresses (fewer registers than generic pointers).
__device__ __forceinline__ uint4 lds16(unsigned a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(a)
               : "memory");
  return v;
}
__device__ __forceinline__ void sts16(unsigned a, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint2 lds8(unsigned a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a) : "memory");
  return v;
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still pending.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Bytes of an E-element vector of `elem` bytes starting at column c0 that lie before n.
__device__ __forceinline__ int bytes_before(int c0, int n, int elems, int elem) {
  const int left = n - c0;
  return (left <= 0 ? 0 : left >= elems ? elems : left) * elem;
}

// Where a thread sits: row groups of tpr threads (a multiple of 32 dividing blockDim.x).
struct RowGroup {
  int tid, t, grp, groups, tpr, warp, lane;
  __device__ explicit RowGroup(int threads_per_row)
      : tid(threadIdx.x),
        t(threadIdx.x % threads_per_row),
        grp(threadIdx.x / threads_per_row),
        groups(blockDim.x / threads_per_row),
        tpr(threads_per_row),
        warp(threadIdx.x / 32),
        lane(threadIdx.x % 32) {}
  // rows as int (fits_rows: < 2^30 rows) to save registers
  __device__ int first_row() const { return int(blockIdx.x) * groups + grp; }
  __device__ int row_stride() const { return int(gridDim.x) * groups; }
  // groups of this block with at least one row
  __device__ int live_groups(int64_t rows) const {
    const int64_t left = rows - int64_t(blockIdx.x) * groups;
    return left < groups ? int(left < 0 ? 0 : left) : groups;
  }
};

// Shared-memory ring: per stage, kVecs 16-byte slots per thread and one 8-byte slot per
// warp (laid out as ring_bytes counts). Slots are named by 32-bit shared-window addresses.
template <int kStages, int kVecs>
struct StageRing {
  unsigned vec;    // this thread's slot of [kStages][kVecs][threads] 16-byte slots
  unsigned warps;  // this warp's slot of [kStages][threads / 32] 8-byte slots
  int threads;

  __device__ StageRing(void *smem, int n_threads) : threads(n_threads) {
    const unsigned base = smem_addr(smem);
    vec = base + threadIdx.x * 16;
    warps = base + unsigned(kStages * kVecs * threads * 16) + (threadIdx.x / 32) * 8;
  }
  __device__ unsigned vec_slot(int s, int k) const {
    return vec + unsigned((s * kVecs + k) * threads * 16);
  }
  __device__ unsigned warp_slot(int s) const { return warps + unsigned(s * (threads / 32) * 8); }
};

// Drives a group over its rows: issue(stage, row) starts the copies of a row into a stage,
// process(stage, row) consumes it; kStages - 1 rows ahead are in flight. Every thread of a
// group sees the same rows, so warps stay converged (groups are whole warps). setup() runs
// once the first rows' copies are issued: loads that need no row overlap them.
template <int kStages, typename Issue, typename Process, typename Setup>
__device__ __forceinline__ void stream_rows(const RowGroup &g, int rows, Issue &&issue,
                                            Process &&process, Setup &&setup) {
  const int stride = g.row_stride();
  const int first = g.first_row();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    const int r = first + s * stride;
    if (r < rows) issue(s, r);
    cp_async_commit();  // empty groups too: the wait below counts groups
  }
  setup();
  int stage = 0;
  for (int r = first; r < rows; r += stride) {
    const int ahead = r + (kStages - 1) * stride;
    __syncwarp();  // the warp slot of the stage rewritten below was read by the whole warp
    if (ahead < rows) issue(stage == 0 ? kStages - 1 : stage - 1, ahead);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // row r's copies are complete
    __syncwarp();                  // ... and lane 0's warp slot visible to the warp
    process(stage, r);
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();
}

// Barrier of one row group (ids 1..15; 0 is __syncthreads'): its tpr threads only.
__device__ __forceinline__ void group_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Sum of v over the row group, the same bits in every thread (reduce.cuh): the warp
// sums meet in red[parity] behind one named barrier of the group. red[parity] is rewritten
// two rows later, after every reader of this row has passed the next row's barrier: one
// barrier per row. parity flips per call.
template <typename V>
__device__ __forceinline__ V group_sum(V v, V (*red)[kMaxWarps], const RowGroup &g,
                                       int &parity) {
  v = rowsum::warp_sum(v);
  const int gwarps = g.tpr / 32;
  if (gwarps == 1) return v;  // uniform over the block
  if (g.lane == 0) red[parity][g.warp] = v;
  group_sync(1 + g.grp, g.tpr);
  const V s = rowsum::partials_sum(red[parity] + g.grp * gwarps, gwarps, g.lane);
  parity ^= 1;
  return s;
}

}  // namespace rowpipe
