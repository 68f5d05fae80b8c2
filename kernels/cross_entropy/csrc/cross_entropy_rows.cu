// Cross entropy forward and backward, the rows that cross_entropy_resident.cu cannot hold
// on chip (or not as 16-byte vectors): one block per row reads them twice, pass 1 for an
// online max and sum of exp (and the sum of the logits, for label smoothing), pass 2 in
// reverse (the part still in L2 first) for dlogits. fp32 arithmetic, one rounding at the
// store; the row's statistics merged in a fixed order: the same bits every call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/static_switch.h"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"
#include "cross_entropy_row.cuh"

namespace {

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

}  // namespace

template <typename T, bool kCap>
cudaError_t ce_job::rows(const CrossEntropyParams &p, const CrossEntropyPlan &plan,
                         cudaStream_t stream) {
  constexpr int kVec = 16 / int(sizeof(T));
  return BOOL_SWITCH(plan.vectorized, kV, [&] {
    auto *kernel = &ce_row_kernel<T, kV ? kVec : 1, kCap>;
    if (plan.count) return launch_dependent(kernel, plan.grid, plan.block, stream, p);
    kernel<<<plan.grid, plan.block, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

template cudaError_t ce_job::rows<float, false>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::rows<float, true>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::rows<__half, false>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::rows<__half, true>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::rows<__nv_bfloat16, false>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::rows<__nv_bfloat16, true>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
