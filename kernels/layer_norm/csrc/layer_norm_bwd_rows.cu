// LayerNorm backward, the rows the ring does not take (ln_bwd_rows): scalar rows
// (unaligned) of up to 2048 columns, in blocks of 256 threads, and rows longer than a row
// group holds (kStream: processed in spans, twice; x, dy and gamma are read again for dx,
// from L2 for rows up to a few MB). Rows load into registers, up to 8 elements a thread
// held as loaded (16-bit values stay packed); TPR is the smallest power of two that holds
// the row. A group's dgamma/dbeta column sums go to its own shared-memory row, added to
// row by row by the owning thread (kStream rows: into the block's workspace row in place).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/row_pipeline.cuh"
#include "../../common/csrc/static_switch.h"
#include "layer_norm_bwd_kernels.cuh"
#include "layer_norm_bwd_launchers.h"

namespace {

// Scalar rows and rows longer than a group holds. T: dtype of x, dy, dx; W: dtype of gamma
// (float when not kAffine); C: 16-byte vectors (of T) per thread and row (per span with
// kStream); kPartials as above; tpr: threads of a row group, a multiple of 32 dividing
// blockDim.x.
template <typename T, typename W, int C, bool kVec, bool kAffine, bool kPartials, bool kStream>
__global__ void __launch_bounds__(kVec ? kMaxTpr : kScalarThreads, 1)
ln_bwd_rows(const LnBwdParams p, const int tpr) {
  constexpr int E = 16 / sizeof(T);
  static_assert(C * E <= kMaxPerThread, "register budget");
  static_assert(!kPartials || kAffine, "column sums need affine");
  extern __shared__ float4 smem[];  // [groups][2][np] column sums (not kStream)
  __shared__ float2 red[2][rowpipe::kMaxWarps];

  const rowpipe::RowGroup g(tpr);
  const int t = g.t;
  const int n = p.n, np = round_up(n, 8);
  const int chunk = tpr * E, span = C * chunk;
  const float inv_n = 1.f / float(n);
  const T *x = static_cast<const T *>(p.x);
  const T *dy = static_cast<const T *>(p.dy);
  const W *gamma = static_cast<const W *>(p.gamma);
  T *dx = static_cast<T *>(p.dx);
  float *acc = reinterpret_cast<float *>(smem) + int64_t(g.grp) * 2 * np;  // this group's
  float *wg = kPartials ? p.ws + int64_t(blockIdx.x) * 2 * np : nullptr;  // this block's
  const int64_t stride = g.row_stride();
  int parity = 0;

  Raw<T> xs[C], ds[C];  // the row as loaded (not kStream)
  for (int64_t row = g.first_row(); row < p.rows; row += stride) {
    const T *xr = x + row * p.x_row;
    const T *dyr = dy + row * p.dy_row;
    T *dxr = dx + row * p.dx_row;
    const float mu = p.mean[row], rs = p.rstd[row];
    const bool first = row < stride;  // this group's first row

    // pass 1: both row sums (resident rows: their column sums too, while x and dy are
    // at hand; fewer live registers than in pass 2)
    float2 sums = make_float2(0.f, 0.f);
    const int spans = kStream ? (n + span - 1) / span : 1;  // 1: provably one trip
    for (int s = 0; s < spans; ++s) {
      const int sb = s * span;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int cb = sb + c * chunk;
        Raw<T> xc, dc;
        xc = load_raw<T, kVec>(xr, cb, t, tpr, n);
        dc = load_raw<T, kVec>(dyr, cb, t, tpr, n);
        if constexpr (!kStream) {
          xs[c] = xc;
          ds[c] = dc;
        }
        float gm[E];
        load_gamma<W, E, kVec, kAffine>(gamma, cb, t, tpr, n, gm);
        sums_chunk<T, E>(xc, dc, gm, mu, rs, sums);
        if constexpr (kPartials && !kStream) {
          float pg[E], dyv[E];
#pragma unroll
          for (int i = 0; i < E; ++i) {
            dyv[i] = to_f<T>(dc.e[i]);
            pg[i] = dyv[i] * ((to_f<T>(xc.e[i]) - mu) * rs);
          }
          add_columns<E, kVec>(acc, cb, t, tpr, n, first, pg);
          add_columns<E, kVec>(acc + np, cb, t, tpr, n, first, dyv);
        }
      }
    }
    sums = rowpipe::group_sum(sums, red, g, parity);
    const float c1 = sums.x * inv_n, c2 = sums.y * inv_n;

    // pass 2: dx (kStream: from a second read, and the column sums into the block's
    // workspace row in place: one group a block)
    for (int s = 0; s < spans; ++s) {
      const int sb = s * span;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int cb = sb + c * chunk;
        Raw<T> xc, dc;
        if constexpr (kStream) {
          xc = load_raw<T, kVec>(xr, cb, t, tpr, n);
          dc = load_raw<T, kVec>(dyr, cb, t, tpr, n);
        } else {
          xc = xs[c];
          dc = ds[c];
        }
        float gm[E], o[E], pg[E], dyv[E];
        load_gamma<W, E, kVec, kAffine>(gamma, cb, t, tpr, n, gm);  // from L1
        dx_chunk<T, E>(xc, dc, gm, mu, rs, c1, c2, o, pg, dyv);
        store_chunk<T, E, kVec>(dxr, cb, t, tpr, n, o);
        if constexpr (kPartials && kStream) {
          add_columns<E, kVec>(wg, cb, t, tpr, n, first, pg);
          add_columns<E, kVec>(wg + np, cb, t, tpr, n, first, dyv);
        }
      }
    }
  }

  if constexpr (kPartials && !kStream) {
    __syncthreads();
    block_column_sums(reinterpret_cast<const float *>(smem), n, g.live_groups(p.rows), wg);
  }
}

}  // namespace

template <typename T, typename W, bool kAffine, bool kPartials>
cudaError_t ln_bwd::rows(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t stream) {
  return BOOL_SWITCH(plan.vectorized, kVec, [&] {
    return BOOL_SWITCH(plan.streamed, kStream, [&] {
      return INT_SWITCH(plan.chunks, C, (1, 2), [&] {
        if constexpr (C * (16 / sizeof(T)) <= kMaxPerThread) {
          return launch_planned(ln_bwd_rows<T, W, C, kVec, kAffine, kPartials, kStream>, p,
                                plan, stream);
        } else {
          return cudaErrorInvalidValue;  // 16-bit rows: one vector a thread (the plan)
        }
      });
    });
  });
}

template cudaError_t ln_bwd::rows<float, float, false, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<float, float, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<float, float, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__half, float, false, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__half, float, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__half, float, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__half, __half, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__half, __half, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__nv_bfloat16, float, false, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__nv_bfloat16, float, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__nv_bfloat16, float, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__nv_bfloat16, __nv_bfloat16, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::rows<__nv_bfloat16, __nv_bfloat16, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
