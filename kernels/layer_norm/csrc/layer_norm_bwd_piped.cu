// LayerNorm backward, vectorized rows of up to 8192 columns (ln_bwd_piped): a persistent
// grid of blocks of max(TPR, 512) threads, each row group walking its rows with the next
// 2-3 rows in flight as cp.async copies into a shared-memory ring
// (kernels/common/csrc/row_pipeline.cuh). The thread's dgamma/dbeta column sums stay in
// registers across rows, and gamma too for fp32 rows (16-bit rows keep it in per-thread
// shared-memory slots). A thread takes 8 elements of an fp32 row (1024 threads an SM at
// <= 64 registers) and 16 of a 16-bit row (512 threads an SM at <= 128 registers): the
// per-row work (row sums, barrier, addressing) is a fixed cost a thread, and at 8 bf16
// elements it made the kernel issue-bound. Rows loaded into registers, one in flight a
// group, were much slower (docs/benchmark-history.md).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/row_pipeline.cuh"
#include "../../common/csrc/static_switch.h"
#include "layer_norm_bwd_kernels.cuh"
#include "layer_norm_bwd_launchers.h"

namespace {

// Vectorized rows a group holds (n <= 8192). T: dtype of x, dy, dx; W: dtype of gamma
// (float when not kAffine); C: 16-byte vectors per thread and row; kPartials: dgamma/dbeta
// column sums into the workspace (off when only dx is asked for). A thread keeps its
// column sums in registers across rows and reads x and dy from the ring twice (once a
// pass). (With x and dy held in registers instead, the column sums went to shared memory,
// read and written every row, and the shared-memory pipe, not DRAM, set the pace.) Shared
// memory: the ring, then gamma (piped_gamma_bytes a thread, [C * 2][threads] float4, each
// thread its own slots).
template <typename T, typename W, int C, bool kAffine, bool kPartials>
__global__ void __launch_bounds__(piped_threads_per_sm(sizeof(T)), 1)
ln_bwd_piped(const LnBwdParams p, const int tpr) {
  constexpr int E = 16 / sizeof(T);
  constexpr int kGammaBytes = piped_gamma_bytes(sizeof(T), C, kAffine);
  constexpr int kStages = piped_stages(sizeof(T), C, kAffine);
  static_assert(C * E <= piped_per_thread(sizeof(T)), "register budget");
  static_assert(!kPartials || kAffine, "column sums need affine");
  extern __shared__ float4 smem[];  // the ring and gamma; at the end the groups' column sums
  __shared__ float2 red[2][rowpipe::kMaxWarps];
  const rowpipe::RowGroup g(tpr);
  const rowpipe::StageRing<kStages, 2 * C> ring(smem, blockDim.x);
  const int n = p.n, chunk = tpr * E;
  const float inv_n = 1.f / float(n);
  const T *x = static_cast<const T *>(p.x);
  const T *dy = static_cast<const T *>(p.dy);
  T *dx = static_cast<T *>(p.dx);

  // gamma: in registers (fp32 rows) or in this thread's shared-memory slots (16-bit rows)
  constexpr bool kHoldGamma = kGammaBytes == 0;
  const unsigned gslot = rowpipe::smem_addr(smem) +
                         unsigned(rowpipe::ring_bytes(kStages, blockDim.x, 2 * C)) + g.tid * 16;
  float gm[kHoldGamma ? C : 1][E], dgs[C][E], dbs[C][E];  // gamma; this thread's column sums
  // gamma and zeroed column sums, once the first rows' copies are issued (stream_rows'
  // setup): gamma's DRAM round trip then overlaps them
  auto init_columns = [&] {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      float gv[E];
      load_gamma<W, E, true, kAffine>(static_cast<const W *>(p.gamma), c * chunk, g.t, tpr, n, gv);
#pragma unroll
      for (int i = 0; i < E; ++i) {
        if constexpr (kHoldGamma) gm[c][i] = gv[i];
        dgs[c][i] = dbs[c][i] = 0.f;
      }
      if constexpr (!kHoldGamma) {
#pragma unroll
        for (int q = 0; q < E / 4; ++q)
          rowpipe::sts16(gslot + (c * E / 4 + q) * blockDim.x * 16,
                         make_uint4(__float_as_uint(gv[4 * q]), __float_as_uint(gv[4 * q + 1]),
                                    __float_as_uint(gv[4 * q + 2]),
                                    __float_as_uint(gv[4 * q + 3])));
      }
    }
  };
  auto gamma_of = [&](int c, float(&out)[E]) {
#pragma unroll
    for (int q = 0; q < E / 4; ++q) {
      if constexpr (kHoldGamma) {
#pragma unroll
        for (int j = 0; j < 4; ++j) out[4 * q + j] = gm[c][4 * q + j];
      } else {
        const uint4 v = rowpipe::lds16(gslot + (c * E / 4 + q) * blockDim.x * 16);
        out[4 * q] = __uint_as_float(v.x);
        out[4 * q + 1] = __uint_as_float(v.y);
        out[4 * q + 2] = __uint_as_float(v.z);
        out[4 * q + 3] = __uint_as_float(v.w);
      }
    }
  };
  int parity = 0;

  auto issue = [&](int s, int row) {
    const T *xr = x + int64_t(row) * p.x_row;
    const T *dyr = dy + int64_t(row) * p.dy_row;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int c0 = c * chunk + g.t * E;
      const int b = rowpipe::bytes_before(c0, n, E, sizeof(T));
      rowpipe::cp_async16(ring.vec_slot(s, c), b ? xr + c0 : xr, b);
      rowpipe::cp_async16(ring.vec_slot(s, C + c), b ? dyr + c0 : dyr, b);
    }
    if (g.lane == 0) {  // the row's statistics, once a warp
      rowpipe::cp_async_small<4>(ring.warp_slot(s), p.mean + row, 4);
      rowpipe::cp_async_small<4>(ring.warp_slot(s) + 4, p.rstd + row, 4);
    }
  };

  auto process = [&](int s, int row) {
    const uint2 stb = rowpipe::lds8(ring.warp_slot(s));
    const float2 st = make_float2(__uint_as_float(stb.x), __uint_as_float(stb.y));
    float2 sums = make_float2(0.f, 0.f);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      Raw<T> xc, dc;
      xc.u = rowpipe::lds16(ring.vec_slot(s, c));
      dc.u = rowpipe::lds16(ring.vec_slot(s, C + c));
      float gv[E];
      gamma_of(c, gv);
      sums_chunk<T, E>(xc, dc, gv, st.x, st.y, sums);
    }
    sums = rowpipe::group_sum(sums, red, g, parity);
    const float c1 = sums.x * inv_n, c2 = sums.y * inv_n;
    T *dxr = dx + int64_t(row) * p.dx_row;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      Raw<T> xc, dc;
      xc.u = rowpipe::lds16(ring.vec_slot(s, c));
      dc.u = rowpipe::lds16(ring.vec_slot(s, C + c));
      float gv[E], o[E], pg[E], dyv[E];
      gamma_of(c, gv);
      dx_chunk<T, E>(xc, dc, gv, st.x, st.y, c1, c2, o, pg, dyv);
      store_chunk<T, E, true>(dxr, c * chunk, g.t, tpr, n, o);
      if constexpr (kPartials) {
#pragma unroll
        for (int i = 0; i < E; ++i) {
          dgs[c][i] += pg[i];
          dbs[c][i] += dyv[i];
        }
      }
    }
  };

  rowpipe::stream_rows<kStages>(g, int(p.rows), issue, process, init_columns);
  // ln_bwd_cols may launch now: its blocks wait for this grid's writes (griddepcontrol.wait)
  allow_dependents();

  if constexpr (kPartials) {
    __syncthreads();  // every thread is done with the ring: it takes the groups' sums now
    const int np = round_up(n, 8);
    float *acc = reinterpret_cast<float *>(smem) + int64_t(g.grp) * 2 * np;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      add_columns<E, true>(acc, c * chunk, g.t, tpr, n, true, dgs[c]);
      add_columns<E, true>(acc + np, c * chunk, g.t, tpr, n, true, dbs[c]);
    }
    __syncthreads();
    block_column_sums(reinterpret_cast<const float *>(smem), n, g.live_groups(p.rows),
                      p.ws + int64_t(blockIdx.x) * 2 * np);
  }
}

}  // namespace

template <typename T, typename W, bool kAffine, bool kPartials>
cudaError_t ln_bwd::piped(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t stream) {
  // C = 1 or 2 vectors a thread: at most piped_per_thread elements of every dtype
  return INT_SWITCH(plan.chunks, C, (1, 2), [&] {
    return launch_planned(ln_bwd_piped<T, W, C, kAffine, kPartials>, p, plan, stream);
  });
}

template cudaError_t ln_bwd::piped<float, float, false, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<float, float, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<float, float, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__half, float, false, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__half, float, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__half, float, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__half, __half, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__half, __half, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__nv_bfloat16, float, false, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__nv_bfloat16, float, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__nv_bfloat16, float, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__nv_bfloat16, __nv_bfloat16, true, false>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
template cudaError_t ln_bwd::piped<__nv_bfloat16, __nv_bfloat16, true, true>(const LnBwdParams &, const LnBwdPlan &, cudaStream_t);
