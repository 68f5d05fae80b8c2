// LayerNorm backward over the last dimension from the saved fp32 mean and rstd,
// deterministic.
//
// Per row, with xhat = (x - mean) * rstd and g = dy * gamma (g = dy without affine):
//   dx = rstd * (g - sum(g)/N - xhat * sum(g * xhat)/N)       (the x-hat form, seed 002)
// and, with affine, dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
// All arithmetic in fp32, one rounding at the store. x and dy are read once per row (kept
// in registers as loaded between the two passes, xhat and g recomputed), and both row
// sums travel as one pair through one reduction (one synchronisation of the row's threads
// per row).
//
// Tiling. A row group of TPR threads (32 ... 1024) works on one row at a time; a thread
// owns the same columns on every row it visits. With 16-byte vectors of E = 16 / sizeof(x)
// elements, chunk c of a row covers TPR * E columns and thread t holds columns
// c*TPR*E + t*E + i (vectorized) or c*TPR*E + i*TPR + t (scalar: coalesced single-element
// accesses), i < E, for C chunks: 8 elements a thread at most, held as loaded (16-bit
// values stay packed). TPR is the smallest power of two that holds the row.
//  - Vectorized rows of up to 8192 columns (ln_bwd_piped): a persistent grid of blocks of
//    max(TPR, 512) threads, each group walking its rows with the next 2-3 rows in flight as
//    cp.async copies into a shared-memory ring (kernels/common/csrc/row_pipeline.cuh).
//    The thread's dgamma/dbeta column sums stay in registers across rows, and gamma too
//    for fp32 rows (16-bit rows keep it in per-thread shared-memory slots). A thread takes
//    8 elements of an fp32 row (1024 threads an SM at <= 64 registers) and 16 of a 16-bit
//    row (512 threads an SM at <= 128 registers): the per-row work (row sums, barrier,
//    addressing) is a fixed cost a thread, and at 8 bf16 elements it made the kernel
//    issue-bound (ncu, H200: 43 instructions an element, 0.75 issued a scheduler). The
//    register-resident predecessor, one row in flight a group, reached 0.41-0.75 of the
//    copy bandwidth on the H200 at the perf shapes; this kernel 0.81-0.93 at 16384x4096
//    and 4096x8192 (BENCHMARKS.md, 2026-11-30 thirteenth session).
//  - Scalar rows (unaligned) of up to 2048 columns (blocks of 256 threads) and longer rows
//    (kStream, processed in spans, twice: x, dy and gamma are read again for dx, from L2
//    for rows up to a few MB) take ln_bwd_rows, which loads into registers.
//
// dgamma/dbeta. Each group's column sums of dy * xhat and dy (ln_bwd_rows: in its own
// shared-memory row, added to row by row by the owning thread; ln_bwd_piped: in registers)
// are added at the end of the block in group order into one workspace row
// ws[block][2][np] (np: N rounded up to 8), written with plain stores (kStream rows add
// into that row in place, row by row). A second kernel sums the workspace rows in a fixed
// order (32 interleaved slices, then the slices in order) and rounds once to gamma's
// dtype; it is a programmatic dependent launch, launched while the main kernel runs.
// No atomics: results are bitwise reproducible for a given device (the grid depends on the
// SM count).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/dtype_dispatch.cuh"
#include "../../common/csrc/row_pipeline.cuh"
#include "layer_norm_bwd.h"

namespace {

constexpr int kMaxTpr = rowpipe::kMaxThreads;  // threads of a row group and of a block
// threads of a block (and at most of a row group) on the scalar path: single-element
// accesses need more registers (their addresses and predicates) than 64
constexpr int kScalarThreads = 256;
// elements of a row a thread holds (C * E): 8 keeps a thread within 64 registers
constexpr int kMaxPerThread = 8;
// ln_bwd_piped's 16-bit rows: 16 elements a thread (half the threads a row, so half the
// reduction work an element), in blocks of 512 threads at up to 128 registers, one an SM
constexpr __host__ __device__ int piped_per_thread(int elem_bytes) {
  return elem_bytes == 2 ? 16 : kMaxPerThread;
}
constexpr __host__ __device__ int piped_threads_per_sm(int elem_bytes) {
  return elem_bytes == 2 ? 512 : rowpipe::kThreadsPerSm;
}

// workspace and shared-memory column-sum rows are n rounded up to 8 floats, on both sides
__host__ __device__ __forceinline__ int round_up(int v, int m) { return (v + m - 1) / m * m; }

// E contiguous elements of V as floats, in 16-byte accesses (E * sizeof(V) is a multiple
// of 16; ptr is 16-byte aligned).
template <typename V, int E>
__device__ __forceinline__ void load_vec(const V *ptr, float (&out)[E]) {
  constexpr int kPer = 16 / sizeof(V);
  static_assert(E % kPer == 0, "whole 16-byte vectors");
#pragma unroll
  for (int v = 0; v < E / kPer; ++v) {
    union { uint4 u; V e[kPer]; } b;
    b.u = reinterpret_cast<const uint4 *>(ptr)[v];
#pragma unroll
    for (int j = 0; j < kPer; ++j) out[v * kPer + j] = to_f<V>(b.e[j]);
  }
}

template <typename T, int E>
__device__ __forceinline__ void store_vec(T *ptr, const float (&in)[E]) {
  static_assert(E * sizeof(T) == 16, "one 16-byte vector");
  union { uint4 u; T e[E]; } b;
#pragma unroll
  for (int i = 0; i < E; ++i) b.e[i] = from_f<T>(in[i]);
  *reinterpret_cast<uint4 *>(ptr) = b.u;
}

// Column of element i of the chunk starting at column cb, for thread t of a row.
template <int E, bool kVec>
__device__ __forceinline__ int col_of(int cb, int t, int tpr, int i) {
  return kVec ? cb + t * E + i : cb + i * tpr + t;
}

// The E elements of the chunk at column cb that thread t owns (zeros past the row's end).
template <typename V, int E, bool kVec>
__device__ __forceinline__ void load_chunk(const V *row, int cb, int t, int tpr, int n,
                                           float (&out)[E]) {
  if (kVec) {
    const int c0 = cb + t * E;
    if (c0 + E <= n) {
      load_vec<V, E>(row + c0, out);
    } else {
#pragma unroll
      for (int i = 0; i < E; ++i) out[i] = c0 + i < n ? to_f<V>(row[c0 + i]) : 0.f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int col = cb + i * tpr + t;
      out[i] = col < n ? to_f<V>(row[col]) : 0.f;
    }
  }
}

template <typename T, int E, bool kVec>
__device__ __forceinline__ void store_chunk(T *row, int cb, int t, int tpr, int n,
                                            const float (&in)[E]) {
  if (kVec) {
    const int c0 = cb + t * E;
    if (c0 + E <= n) {
      store_vec<T, E>(row + c0, in);
    } else {
#pragma unroll
      for (int i = 0; i < E; ++i)
        if (c0 + i < n) row[c0 + i] = from_f<T>(in[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int col = cb + i * tpr + t;
      if (col < n) row[col] = from_f<T>(in[i]);
    }
  }
}

template <typename W, int E, bool kVec, bool kAffine>
__device__ __forceinline__ void load_gamma(const W *gamma, int cb, int t, int tpr, int n,
                                           float (&out)[E]) {
  if (kAffine) {
    load_chunk<W, E, kVec>(gamma, cb, t, tpr, n, out);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = 1.f;
  }
}

// One 16-byte vector of T as loaded (E = 16 / sizeof(T) elements): held between the
// passes in this form, half the registers of floats for 16-bit x and dy.
template <typename T> union Raw {
  uint4 u;
  T e[16 / sizeof(T)];
};

// The chunk at column cb that thread t owns, raw (zeros past the row's end).
template <typename T, bool kVec>
__device__ __forceinline__ Raw<T> load_raw(const T *row, int cb, int t, int tpr, int n) {
  constexpr int E = 16 / sizeof(T);
  Raw<T> r;
  if (kVec && cb + t * E + E <= n) {
    r.u = *reinterpret_cast<const uint4 *>(row + cb + t * E);
    return r;
  }
  r.u = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const int col = col_of<E, kVec>(cb, t, tpr, i);
    if (col < n) r.e[i] = row[col];
  }
  return r;
}

// acc[col] (+)= v for the E columns of the chunk at cb that thread t owns (first: =).
template <int E, bool kVec>
__device__ __forceinline__ void add_columns(float *acc, int cb, int t, int tpr, int n,
                                            bool first, const float (&v)[E]) {
  if (kVec && cb + t * E + E <= n) {  // whole vectors: acc rows are 32-byte aligned
    float4 *a = reinterpret_cast<float4 *>(acc + cb + t * E);
#pragma unroll
    for (int q = 0; q < E / 4; ++q) {
      float4 o = first ? make_float4(0.f, 0.f, 0.f, 0.f) : a[q];
      o.x += v[4 * q];
      o.y += v[4 * q + 1];
      o.z += v[4 * q + 2];
      o.w += v[4 * q + 3];
      a[q] = o;
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int col = col_of<E, kVec>(cb, t, tpr, i);
      if (col < n) acc[col] = first ? v[i] : acc[col] + v[i];
    }
  }
}

// s += a, component by component (in x, y, z, w order)
__device__ __forceinline__ void add4(float4 &s, const float4 a) {
  s.x += a.x;
  s.y += a.y;
  s.z += a.z;
  s.w += a.w;
}

// The block's groups' column sums acc[g][2][np] (groups with a row only), added in group
// order into the block's workspace row wg[2][np]. Call after a barrier. 4 columns a thread
// (np is a multiple of 8, so j + 3 < np; columns n .. np - 1 carry whatever the staged rows
// held there, and ln_bwd_cols drops their sums): a warp store is 512 contiguous bytes. One
// float a thread took a median 2.8 us from a block's last row to its 64 KiB row written,
// these 2.0 (4096x8192 bf16, 132 blocks at once; 4096x8192 bf16 0.796/0.798 -> 0.814/0.812
// of the copy bandwidth, H200, 2026-11-30 thirteenth session).
__device__ __forceinline__ void block_column_sums(const float *acc, int n, int live,
                                                  float *wg) {
  const int np = round_up(n, 8);
  for (int j = threadIdx.x * 4; j < n; j += blockDim.x * 4) {
    float4 s0 = make_float4(0.f, 0.f, 0.f, 0.f), s1 = s0;
    for (int g = 0; g < live; ++g) {
      const float4 a = *reinterpret_cast<const float4 *>(acc + int64_t(g) * 2 * np + j);
      const float4 b = *reinterpret_cast<const float4 *>(acc + int64_t(g) * 2 * np + np + j);
      add4(s0, a);
      add4(s1, b);
    }
    *reinterpret_cast<float4 *>(wg + j) = s0;
    *reinterpret_cast<float4 *>(wg + np + j) = s1;
  }
}

// dx of one chunk from the row's sums (c1 = sum(g)/N, c2 = sum(g * xhat)/N); dgamma and
// dbeta terms of its columns into pg and dyv.
template <typename T, int E>
__device__ __forceinline__ void dx_chunk(const Raw<T> &xc, const Raw<T> &dc,
                                         const float (&gm)[E], float mu, float rs, float c1,
                                         float c2, float (&o)[E], float (&pg)[E],
                                         float (&dyv)[E]) {
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const float xhv = (to_f<T>(xc.e[i]) - mu) * rs;
    dyv[i] = to_f<T>(dc.e[i]);
    o[i] = rs * (dyv[i] * gm[i] - c1 - xhv * c2);
    pg[i] = dyv[i] * xhv;
  }
}

// sum(g) and sum(g * xhat) of one chunk onto s (g = dy * gamma; 0 past the row's end,
// where dy reads as 0).
template <typename T, int E>
__device__ __forceinline__ void sums_chunk(const Raw<T> &xc, const Raw<T> &dc,
                                           const float (&gm)[E], float mu, float rs,
                                           float2 &s) {
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const float xhv = (to_f<T>(xc.e[i]) - mu) * rs;
    const float g = to_f<T>(dc.e[i]) * gm[i];
    s.x += g;
    s.y += g * xhv;
  }
}

// Bytes of gamma a thread of ln_bwd_piped keeps in shared memory: 16-bit rows with gamma
// (8 columns a vector: 32 bytes of fp32 a thread). Read from global memory per pass instead,
// as two 16-byte loads at a 32-byte thread stride, gamma took 36% of the kernel's L2
// sectors and loaded L1 to 70% on the H200; held in registers next to the column sums it
// spills. fp32 rows hold their 16 or 32 bytes in registers.
constexpr __host__ __device__ int piped_gamma_bytes(int elem_bytes, int chunks, bool affine) {
  return elem_bytes == 2 && affine ? chunks * 8 * 4 : 0;
}

// Ring stages of ln_bwd_piped, each x and dy of `chunks` vectors a thread: one expression
// for the kernel and its host plan, which must agree.
constexpr __host__ __device__ int piped_stages(int elem_bytes, int chunks, bool affine) {
  return rowpipe::ring_stages(2 * chunks * 16, piped_gamma_bytes(elem_bytes, chunks, affine),
                              piped_threads_per_sm(elem_bytes));
}

// Vectorized rows a group holds (n <= 8192). T: dtype of x, dy, dx; W: dtype of gamma
// (float when not kAffine); C: 16-byte vectors per thread and row; kPartials: dgamma/dbeta
// column sums into the workspace (off when only dx is asked for). A thread keeps its
// column sums in registers across rows and reads x and dy from the ring twice (once a
// pass). (With x and dy held in registers instead, the column sums no longer fit and went
// to shared memory, read and written every row: on the H200 the L1/shared-memory pipe ran
// at 81% while DRAM ran at 50%.) Shared memory: the ring, then gamma (piped_gamma_bytes a
// thread, [C * 2][threads] float4, each thread its own slots).
template <typename T, typename W, int C, bool kAffine, bool kPartials>
__global__ void __launch_bounds__(piped_threads_per_sm(sizeof(T)), 1) ln_bwd_piped(const LnBwdParams p, const int tpr) {
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

// Second stage: dgamma (blockIdx.y 0) and dbeta (1) of 32 columns a block from the
// workspace rows [parts][2][np]. Thread (slice s, 4 columns) sums parts s, s + 32, ... in
// order as float4s, its loads kColsBatch at a time (one round of L2 latency for up to
// 32 * kColsBatch parts); then each warp sums 4 slices in order and one warp the 8 warps'
// sums in order. It runs after the main kernel's last row, so its latency is the op's:
// against 8 slices of scalar loads, 4 at a time (16-17 loads a thread for 132 parts),
// +0.7-6% at the six perf shapes (4096x8192 bf16 0.754 -> 0.772 of the copy bandwidth;
// H200, 2026-11-30 eighth session). Batches of 4 (40 registers instead of 56) gained less.
constexpr int kRedCols = 32, kRedSlices = 32, kColsBatch = 8;
constexpr int kColsThreads = kRedCols / 4 * kRedSlices;

template <typename W>
__global__ void __launch_bounds__(kColsThreads)
ln_bwd_cols(const LnBwdParams p, const int parts) {
  __shared__ float4 sh[kRedSlices][kRedCols / 4];
  __shared__ float warp_sums[kColsThreads / 32][kRedCols];
  // launched as a programmatic dependent of the main kernel: wait until its writes (the
  // workspace) are complete and visible
  wait_for_primary();
  const int q = threadIdx.x % (kRedCols / 4), slice = threadIdx.x / (kRedCols / 4);
  const int which = blockIdx.y;
  const int n = p.n, np = round_up(n, 8);
  // np is a multiple of 8, so col0 + 3 < np; columns n .. np - 1 of a workspace row hold
  // no column's sums (unwritten, or what a block's staged rows held there): their sums are
  // formed and dropped
  const int col0 = blockIdx.x * kRedCols + q * 4;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  if (col0 < n) {
    const float4 *w = reinterpret_cast<const float4 *>(p.ws + int64_t(which) * np + col0);
    const int64_t step = int64_t(np) / 2;  // float4s from one part's row to the next
    for (int r0 = slice; r0 < parts; r0 += kRedSlices * kColsBatch) {
      float4 v[kColsBatch];
#pragma unroll
      for (int k = 0; k < kColsBatch; ++k) {
        const int r = r0 + k * kRedSlices;
        if (r < parts) v[k] = w[int64_t(r) * step];
      }
#pragma unroll
      for (int k = 0; k < kColsBatch; ++k) {
        if (r0 + k * kRedSlices < parts) add4(s, v[k]);
      }
    }
  }
  sh[slice][q] = s;
  __syncthreads();
  const float *shf = reinterpret_cast<const float *>(sh);  // [slice][32 columns]
  const int c = threadIdx.x % kRedCols, wp = threadIdx.x / kRedCols;
  constexpr int kPerWarp = kRedSlices / (kColsThreads / 32);
  float t = 0.f;
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) t += shf[(wp * kPerWarp + i) * kRedCols + c];
  warp_sums[wp][c] = t;
  __syncthreads();
  const int col = blockIdx.x * kRedCols + c;
  if (wp == 0 && col < n) {
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < kColsThreads / 32; ++k) total += warp_sums[k][c];
    static_cast<W *>(which ? p.dbeta : p.dgamma)[col] = from_f<W>(total);
  }
}

bool aligned(const void *ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

int elem_size(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }

// Launches kernel(p, tpr) with the plan's grid, block and dynamic shared memory.
template <typename Kernel>
cudaError_t launch_planned(Kernel kernel, const LnBwdParams &p, const LnBwdPlan &plan,
                           cudaStream_t s) {
  if (plan.smem_bytes > 48 * 1024) {  // opt in above the default dynamic limit
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem_bytes));
    if (err != cudaSuccess) return err;
  }
  kernel<<<plan.grid, plan.block, plan.smem_bytes, s>>>(p, plan.tpr);
  return cudaSuccess;
}

template <typename T, typename W, int C, bool kVec, bool kAffine, bool kPartials, bool kStream>
cudaError_t launch_one(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if (plan.piped) {
    if constexpr (kVec && !kStream && C * (16 / sizeof(T)) <= piped_per_thread(sizeof(T)))
      return launch_planned(ln_bwd_piped<T, W, C, kAffine, kPartials>, p, plan, s);
    return cudaErrorInvalidValue;  // the plan never asks for it
  }
  if constexpr (C * (16 / sizeof(T)) <= kMaxPerThread) {
    return launch_planned(ln_bwd_rows<T, W, C, kVec, kAffine, kPartials, kStream>, p, plan, s);
  } else {
    return cudaErrorInvalidValue;  // the plan never asks for it
  }
}

template <typename T, typename W, bool kVec, bool kAffine, bool kPartials, bool kStream>
cudaError_t launch_chunks(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  switch (plan.chunks) {
    case 1: return launch_one<T, W, 1, kVec, kAffine, kPartials, kStream>(p, plan, s);
    case 2: return launch_one<T, W, 2, kVec, kAffine, kPartials, kStream>(p, plan, s);
    case 4: return launch_one<T, W, 4, kVec, kAffine, kPartials, kStream>(p, plan, s);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, typename W, bool kAffine, bool kPartials>
cudaError_t launch_mode(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if (plan.vectorized)
    return plan.streamed ? launch_chunks<T, W, true, kAffine, kPartials, true>(p, plan, s)
                         : launch_chunks<T, W, true, kAffine, kPartials, false>(p, plan, s);
  return plan.streamed ? launch_chunks<T, W, false, kAffine, kPartials, true>(p, plan, s)
                       : launch_chunks<T, W, false, kAffine, kPartials, false>(p, plan, s);
}

template <typename T, typename W>
cudaError_t launch_affine(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  return p.ws ? launch_mode<T, W, true, true>(p, plan, s)
              : launch_mode<T, W, true, false>(p, plan, s);
}

template <typename T>
cudaError_t launch_typed(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if (!p.affine) return launch_mode<T, float, false, false>(p, plan, s);
  if (p.w_dtype == DType::kFloat32) return launch_affine<T, float>(p, plan, s);
  if (elem_size(p.w_dtype) != sizeof(T)) return cudaErrorInvalidValue;
  if (p.w_dtype != p.x_dtype) return cudaErrorInvalidValue;  // gamma: fp32 or x's dtype
  return launch_affine<T, T>(p, plan, s);
}

}  // namespace

int layer_norm_ws_row(int n) { return round_up(n, 8); }

LnBwdPlan layer_norm_bwd_plan(const LnBwdParams &p, bool partials, int sm_count) {
  LnBwdPlan plan{};
  const int es = elem_size(p.x_dtype);
  const int E = 16 / es;
  plan.vectorized = aligned(p.x, 16) && aligned(p.dy, 16) && aligned(p.dx, 16) &&
                    (!p.affine || aligned(p.gamma, 16)) && p.x_row % E == 0 &&
                    p.dy_row % E == 0 && p.dx_row % E == 0;
  const int64_t n = p.n;
  const size_t sums_row = 2 * size_t(layer_norm_ws_row(p.n)) * sizeof(float);  // a group's
  const int sm_threads = piped_threads_per_sm(es), per_thread = piped_per_thread(es);
  if (plan.vectorized && rowpipe::fits_rows(p.rows, n, per_thread) &&
      n <= int64_t(sm_threads) * per_thread) {  // ln_bwd_piped
    const rowpipe::RowShape shape = rowpipe::row_shape(n, E, per_thread);
    plan.piped = true;
    plan.tpr = shape.tpr;
    plan.chunks = shape.chunks;
    plan.block = dim3(unsigned(shape.threads));
    const int vecs = 2 * plan.chunks;  // x and dy
    const int gamma_bytes = piped_gamma_bytes(es, plan.chunks, p.affine);
    const size_t ring =
        rowpipe::ring_bytes(piped_stages(es, plan.chunks, p.affine), shape.threads, vecs) +
        size_t(gamma_bytes) * shape.threads;
    // the groups' column sums reuse the ring at the end
    const size_t sums = partials ? size_t(shape.threads / shape.tpr) * sums_row : 0;
    plan.smem_bytes = std::max(ring, sums);
    plan.parts = rowpipe::resident_grid(p.rows, shape, plan.smem_bytes, sm_count, sm_threads);
    plan.grid = dim3(unsigned(plan.parts));
    return plan;
  }
  const int max_tpr = plan.vectorized ? kMaxTpr : kScalarThreads;
  plan.streamed = n > int64_t(max_tpr) * kMaxPerThread;
  plan.tpr = plan.streamed ? max_tpr
                           : std::max(32, rowpipe::pow2_at_least((n + kMaxPerThread - 1) /
                                                                 kMaxPerThread));
  // chunks of TPR * E columns: the whole row (resident) or a span (streamed)
  const int64_t chunk = int64_t(plan.tpr) * E;
  plan.chunks = plan.streamed ? std::max(1, kMaxPerThread / E)
                              : rowpipe::pow2_at_least((n + chunk - 1) / chunk);
  const int threads = plan.vectorized ? plan.tpr : kScalarThreads;  // vectorized: streamed
  const int groups = threads / plan.tpr;
  plan.block = dim3(unsigned(threads));
  // resident blocks an SM: vectorized (1024 threads, <= 64 registers a thread) one; the
  // scalar kernel's 256 threads may take up to 255 registers: 2 assumed
  const int per_sm = plan.vectorized ? std::max(1, rowpipe::kThreadsPerSm / threads) : 2;
  const int64_t blocks = (p.rows + groups - 1) / groups;
  const int64_t cap = int64_t(std::max(sm_count, 1)) * per_sm;
  plan.parts = int(std::max<int64_t>(1, std::min(blocks, cap)));
  plan.grid = dim3(unsigned(plan.parts));
  plan.smem_bytes = (partials && !plan.streamed) ? size_t(groups) * sums_row : 0;
  return plan;
}

cudaError_t layer_norm_bwd_launch(const LnBwdParams &p, const LnBwdPlan &plan,
                                  cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  if (p.ws && !p.affine) return cudaErrorInvalidValue;
  cudaError_t err = with_dtype(p.x_dtype, [&](auto t) {
    return launch_typed<typename decltype(t)::type>(p, plan, stream);
  });
  if (err != cudaSuccess) return err;
  err = cudaGetLastError();
  if (err != cudaSuccess || !p.ws) return err;
  const dim3 grid(unsigned((p.n + kRedCols - 1) / kRedCols), 2), block(kColsThreads);
  return with_dtype(p.w_dtype, [&](auto w) {
    // A programmatic dependent launch: the launch overlaps the main kernel's last rows
    // (with gamma loaded after the first rows' copies are issued, +0.3-11% at the six perf
    // shapes, H200, 2026-11-30 seventh session; the gap between the kernels was 1.9 us).
    return launch_dependent(ln_bwd_cols<typename decltype(w)::type>, grid, block, stream, p,
                            plan.parts);
  });
}
