// Cross entropy forward and backward together: the launch sequence, and the row kernel
// for rows that cross_entropy_resident.cu cannot hold on chip (or not as 16-byte vectors).
//   count (a mean only): the non-ignored targets, counted on the device;
//   rows: the loss and dlogits of each row. Resident rows read the logits once; here one
//     block per row reads them twice: pass 1 for an online max and sum of exp (and the sum
//     of the logits, for label smoothing), pass 2 in reverse (the part still in L2 first)
//     for dlogits. fp32 arithmetic, one rounding at the store;
//   loss (a mean or sum): the per-token losses summed in a fixed order.
// No atomics, no host sync: the same bits every call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/static_switch.h"
#include "cross_entropy.h"
#include "cross_entropy_row.cuh"

namespace {

using ce::kMaxThreads;

// The sum of every thread's v over one block, in a fixed order (a butterfly per warp, the
// warps' partials in order), valid in thread 0.
template <typename T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T part[kMaxThreads / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  T total = T(0);
  if (threadIdx.x == 0)
    for (int w = 0; w < int(blockDim.x >> 5); ++w) total += part[w];
  return total;
}

// Non-ignored targets, counted by one block (an integer sum). The row kernel, launched
// as its dependent, starts reading logits at once and waits for the count only before
// its gradient.
__global__ void __launch_bounds__(kMaxThreads) ce_count_kernel(CrossEntropyParams p) {
  allow_dependents();
  int c = 0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x)
    c += ce::target_of(p, i) != p.ignore_index;
  const int total = block_sum(c);
  if (threadIdx.x == 0) *p.count = total;
}

template <typename T, int kN>
__device__ __forceinline__ void load(const T *src, float (&v)[kN]) {
  if constexpr (kN == 1) v[0] = to_f(src[0]);
  else ce::unpack<T, kN>(*reinterpret_cast<const uint4 *>(src), v);
}

template <typename T, int kN>
__device__ __forceinline__ void store(T *dst, const float (&g)[kN]) {
  if constexpr (kN == 1) dst[0] = from_f<T>(g[0]);
  else *reinterpret_cast<uint4 *>(dst) = ce::pack<T, kN>(g);
}

// One block per row. kN: elements per access (16 bytes, or 1 where rows are not 16-byte
// aligned or V is not a multiple); kCap: softcap on.
template <typename T, int kN, bool kCap>
__global__ void __launch_bounds__(kMaxThreads) ce_row_kernel(CrossEntropyParams p) {
  __shared__ float sm_xy;
  const int64_t row = blockIdx.x;
  const int V = p.vocab;
  const T *x = static_cast<const T *>(p.logits) + row * p.logits_row;
  T *dx = static_cast<T *>(p.dlogits) + row * p.dlogits_row;
  const int64_t y = ce::target_of(p, row);
  const int vectors = V / kN;
  float *row_out = p.reduction == CeReduction::kNone ? p.loss : p.row_loss;

  if (y == p.ignore_index) {  // no loss, a zero gradient row
    float z[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) z[j] = 0.f;
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) store<T, kN>(dx + i * kN, z);
    if (threadIdx.x == 0) row_out[row] = 0.f;
    wait_for_primary();  // not done before the count: the loss kernel relies on that
    return;
  }
  const bool in_range = y >= 0 && y < V;
  if (threadIdx.x == 0) {
    float v[1] = {NAN};
    if (in_range) load<T, 1>(x + y, v);
    if (kCap && in_range) ce::cap_all(v, p.softcap);
    sm_xy = v[0];
  }

  const bool sum_x = p.label_smoothing != 0.f;
  const float x0 = sum_x ? ce::first_logit<T, kCap>(x, p.softcap) : 0.f;
  ce::Partial a;
  for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
    float v[kN];
    load<T, kN>(x + i * kN, v);
    if constexpr (kCap) ce::cap_all(v, p.softcap);
    ce::accumulate(a, v, sum_x, x0);
  }
  a = ce::block_merge(a);  // its barrier also publishes sm_xy
  wait_for_primary();      // the count, for a mean
  float loss;
  const ce::RowGrad r = ce::row_grad(p, row, a, sm_xy, x0, in_range, &loss);
  if (threadIdx.x == 0) row_out[row] = loss;

  for (int i = vectors - 1 - int(threadIdx.x); i >= 0; i -= blockDim.x) {
    float v[kN], g[kN];
    load<T, kN>(x + i * kN, v);
    ce::grad_of<kN, kCap>(r, v, int64_t(i) * kN, y, p.softcap, g);
    store<T, kN>(dx + i * kN, g);
  }
}

// The loss of a mean or sum: the per-token losses summed by one block in a fixed order,
// in double, divided by the non-ignored count for a mean.
__global__ void __launch_bounds__(kMaxThreads) ce_loss_kernel(CrossEntropyParams p) {
  wait_for_primary();
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) acc += double(p.row_loss[i]);
  double total = block_sum(acc);
  if (threadIdx.x == 0) {
    if (p.reduction == CeReduction::kMean) total /= double(max(*p.count, 1));
    *p.loss = float(total);
  }
}

// Threads per row block: about four accesses a thread, 32 to 1024.
int row_threads(int vectors) {
  int t = 32;
  while (t < kMaxThreads && t * 4 < vectors) t *= 2;
  return t;
}

template <typename T>
cudaError_t launch_rows(const CrossEntropyParams &p, bool vectorized, bool after_count,
                        cudaStream_t stream) {
  constexpr int kVec = 16 / int(sizeof(T));
  const int n = vectorized ? kVec : 1;
  const dim3 grid(unsigned(p.rows)), block(unsigned(row_threads(p.vocab / n)));
  return BOOL_SWITCH(vectorized, kV, [&] {
    return BOOL_SWITCH(p.softcap > 0.f, kCap, [&] {
      auto *kernel = &ce_row_kernel<T, kV ? kVec : 1, kCap>;
      if (after_count) return launch_dependent(kernel, grid, block, stream, p);
      kernel<<<grid, block, 0, stream>>>(p);
      return cudaGetLastError();
    });
  });
}

}  // namespace

cudaError_t cross_entropy_launch(const CrossEntropyParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  // A row kernel launched after the count overlaps it (its reads need nothing the count
  // writes); launched first, it must not start before the work that wrote the logits.
  const bool mean = p.reduction == CeReduction::kMean;
  if (mean) {
    ce_count_kernel<<<1, kMaxThreads, 0, stream>>>(p);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  const int es = elem_size(p.dtype);
  const bool vectorized = p.vocab % (16 / es) == 0 && (p.logits_row * es) % 16 == 0 &&
                          (p.dlogits_row * es) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(p.logits) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(p.dlogits) % 16 == 0;
  cudaError_t err = cudaErrorNotSupported;
  if (vectorized) err = ce_resident_launch(p, mean, stream);
  if (err == cudaErrorNotSupported) {
    err = DTYPE_SWITCH(p.dtype, T, [&] { return launch_rows<T>(p, vectorized, mean, stream); });
  }
  if (err != cudaSuccess || p.reduction == CeReduction::kNone) return err;
  return launch_dependent(&ce_loss_kernel, dim3(1), dim3(kMaxThreads), stream, p);
}
