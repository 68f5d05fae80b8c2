// Fixed-order reductions across threads, the home of the kernels' sums and merges over a
// warp or a block (the ring row kernel of row_pipeline.cuh, softmax, cross entropy, AdamW):
// every order is fixed by lane and warp indices, never by timing, so a result has the same
// bits run after run, and, where every thread computes it, in every thread.
//
// Within a warp: warp_reduce (an xor butterfly of any commutative step: a sum, or a merge
// of (max, sum of exp) pairs), warp_sum, and warp_sum_down (a shfl_down tree into lane 0).
// Across the warps of a block: WarpSlots, the warps' results in shared memory behind one
// barrier, folded in warp order (reduce, reduce_onto) or by a warp (partials_sum); and the
// block sums built from them (block_sum, block_sum_tree).
#pragma once

namespace rowsum {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float zero_like(float) { return 0.f; }
__device__ __forceinline__ float2 zero_like(float2) { return make_float2(0.f, 0.f); }

// A reduction's step. op(a, b) combines b into a (a then b); op.with_lane(a, off) combines
// into a the a of lane (this lane ^ off), through shuffles. Add is a sum's; a value of
// several fields brings its own (ce::MergeStep: each field's shuffle next to its use).
struct Add {
  template <typename T>
  __device__ __forceinline__ void operator()(T &a, const T &b) const { a += b; }
  template <typename T>
  __device__ __forceinline__ void with_lane(T &a, int off) const {
    a += __shfl_xor_sync(kFullMask, a, off);
  }
};

// Over the 32 lanes by an xor butterfly: op.with_lane(v, off) for off = 16, 8, 4, 2, 1.
// With a commutative op each step combines the same two values in every lane, in either
// order: the same bits everywhere.
template <typename T, typename Op = Add>
__device__ __forceinline__ T warp_reduce(T v, Op op = {}) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) op.with_lane(v, off);
  return v;
}

// Sum over the 32 lanes (float, double, int): the butterfly, in every lane.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  return warp_reduce(v);
}

// Both sums of a float2 over the 32 lanes in 6 shuffles instead of 10: one exchange
// leaves x of the lane pair in even lanes and y in odd ones, an xor butterfly over the
// even offsets sums each parity class (the same bits in every lane of it), and one more
// exchange gives each lane the other class's sum. The LayerNorm ring kernel (both row
// sums, every row) is faster with it than with the plain butterfly
// (docs/benchmark-history.md). (1-D blocks: a lane's parity is its thread index's.)
__device__ __forceinline__ float2 warp_sum(float2 v) {
  const bool odd = threadIdx.x & 1;
  float k = odd ? v.y : v.x;
  k += __shfl_xor_sync(kFullMask, odd ? v.x : v.y, 1);
#pragma unroll
  for (int off = 16; off > 1; off >>= 1) k += __shfl_xor_sync(kFullMask, k, off);
  const float o = __shfl_xor_sync(kFullMask, k, 1);
  return odd ? make_float2(o, k) : make_float2(k, o);
}

// Sum over the 32 lanes by a tree, lane i adding lane i + off for off = 16, 8, 4, 2, 1:
// the sum in lane 0 only (the other lanes hold partial sums).
template <typename T>
__device__ __forceinline__ T warp_sum_down(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(kFullMask, v, off);
  return v;
}

// Sum of part[0 .. count) (count <= 32, in shared memory, behind a barrier), for every lane
// of the calling warp: lane w takes part[w] (0 past count) and the warp sums by butterfly,
// instead of a load and an add per partial in every thread. In the softmax block kernels
// (one row a block) it is faster than the loop only together with 32-bit row offsets
// (docs/benchmark-history.md): the block rows of up to 4 vectors a thread use it, the
// longer ones keep the loop.
template <typename V>
__device__ __forceinline__ V partials_sum(const V *part, int count, int lane) {
  return warp_sum(lane < count ? part[lane] : zero_like(part[0]));
}

// The slots of WarpSlots: the results of a block's warps, one a warp, in a shared-memory
// array that the caller declares (__shared__ T part[kMaxWarps]; 1-D blocks of whole warps,
// at most kMaxWarps). A value of several fields may keep each field in an array of its own
// instead (ce::PartialSlots: its at(w) hands the step the arrays, each field read where the
// step uses it). A slots type has value_type, store_if and at.
template <typename T>
struct SlotArray {
  using value_type = T;
  T *v;
  // x into slot w where cond holds. (The condition inside, not around the call: the
  // compiler then emits exactly what the same store under an `if` in the kernel gave.)
  __device__ __forceinline__ void store_if(bool cond, int w, const T &x) const {
    if (cond) v[w] = x;
  }
  __device__ __forceinline__ const T &at(int w) const { return v[w]; }
};

// The warps' results of a block exchanged through shared memory, and folded in warp order.
template <typename Slots>
struct WarpSlots : Slots {
  using T = typename Slots::value_type;

  // Lane 0 of each warp puts x, its warp's result, in the warp's slot; then a barrier of
  // the block makes every slot visible to every thread. Returns the block's warps (the
  // slots filled).
  __device__ __forceinline__ int put(const T &x) const {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    this->store_if(lane == 0, warp, x);
    __syncthreads();
    return warps;
  }
  // Slot 0, then op(acc, slot w) for w = 1 .. n - 1: in warp order.
  template <typename Op = Add>
  __device__ __forceinline__ T reduce(int n, Op op = {}) const {
    T acc = this->at(0);
    for (int w = 1; w < n; ++w) op(acc, this->at(w));
    return acc;
  }
  // acc, then op(acc, slot w) for w = 0 .. n - 1: in warp order.
  template <typename Op = Add>
  __device__ __forceinline__ T reduce_onto(T acc, int n, Op op = {}) const {
    for (int w = 0; w < n; ++w) op(acc, this->at(w));
    return acc;
  }
};

// The warp slots of part, a __shared__ array of a slot a warp.
template <typename T>
__device__ __forceinline__ WarpSlots<SlotArray<T>> warp_slots(T *part) {
  return WarpSlots<SlotArray<T>>{{part}};
}

// Sum of v over the block (at most kMaxWarps warps), valid in thread 0: each warp's
// butterfly, then thread 0 adds the warps' sums to zero in warp order. One barrier; call it
// once a kernel.
template <int kMaxWarps, typename T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T part[kMaxWarps];
  const auto slots = warp_slots(part);
  slots.put(warp_sum(v));
  T total = T(0);
  if (threadIdx.x == 0) total = slots.reduce_onto(total, int(blockDim.x >> 5));
  return total;
}

// Sum of v over a block of kWarps warps, valid in thread 0, by trees: each warp's
// warp_sum_down, then warp 0's over the warps' sums (zeros past kWarps). Ends with a
// barrier, so that the block may call it again at once.
template <int kWarps, typename T>
__device__ __forceinline__ T block_sum_tree(T v) {
  __shared__ T part[kWarps];
  warp_slots(part).put(warp_sum_down(v));
  T s = T(0);
  if (threadIdx.x < 32) s = warp_sum_down(threadIdx.x < kWarps ? part[threadIdx.x] : T(0));
  __syncthreads();
  return s;
}

}  // namespace rowsum
