// Fixed-order sums across threads, the same bits in every participating thread: the
// deterministic reductions of the ring row kernel (row_pipeline.cuh).
#pragma once

namespace rowsum {

__device__ __forceinline__ float zero_like(float) { return 0.f; }
__device__ __forceinline__ float2 zero_like(float2) { return make_float2(0.f, 0.f); }

// Sum over the 32 lanes: an xor butterfly (each step adds the same two values in every
// lane, in either order: the same bits everywhere).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
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
  k += __shfl_xor_sync(0xffffffffu, odd ? v.x : v.y, 1);
#pragma unroll
  for (int off = 16; off > 1; off >>= 1) k += __shfl_xor_sync(0xffffffffu, k, off);
  const float o = __shfl_xor_sync(0xffffffffu, k, 1);
  return odd ? make_float2(o, k) : make_float2(k, o);
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

}  // namespace rowsum
