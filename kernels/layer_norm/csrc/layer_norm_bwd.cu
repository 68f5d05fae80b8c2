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
// values stay packed), and the next row's 8 already in flight while this row is reduced
// and stored (not for fp32 rows of 2 chunks with dgamma: that would spill). A thread then needs at most 64 registers and an SM keeps 32 warps busy; with
// 32 elements a thread and no prefetch (~180 registers, 8 warps an SM) 4096x8192 bf16
// reached 0.32 of the copy bandwidth on the H200. TPR is the smallest power of two that
// holds the row, so rows of up to 8192 columns stay in registers (2048 on the scalar
// path, whose blocks have 256 threads); a block of 512 threads holds 512 / TPR groups
// (1024 threads for TPR 1024), each synchronised by its own named barrier. Longer rows
// (kStream) are processed in spans, twice: x, dy and gamma are read again for dx (from L2
// for rows up to a few MB).
//
// dgamma/dbeta. Each group adds dy * xhat and dy of its rows into its own shared-memory
// row of column sums (the owning thread reads and writes its columns: no races, no
// registers held across rows); at the end the block adds its groups in group order and
// writes one workspace row ws[block][2][np] (np: N rounded up to 8) with plain stores
// (kStream rows add into that row in place, row by row). A second kernel sums the workspace rows in a fixed order (8
// interleaved slices, then the slices in order) and rounds once to gamma's dtype. No
// atomics: results are bitwise reproducible for a given device (the grid depends on the SM
// count).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../../common/csrc/convert.cuh"
#include "layer_norm_bwd.h"

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxTpr = 1024;     // threads of a row group (and of the largest block)
constexpr int kGroupBlock = 512;  // threads of a block of groups of TPR <= 512
// threads of a block (and at most of a row group) on the scalar path: single-element
// accesses need more registers (their addresses and predicates) than 64
constexpr int kScalarThreads = 256;
// elements of a row a thread holds (C * E), for this row and the next: 8 keeps a thread
// within 64 registers
constexpr int kMaxPerThread = 8;

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

// Barrier of one row group (ids 1..15; 0 is __syncthreads'): its TPR threads only.
__device__ __forceinline__ void group_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
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

// Main kernel. T: dtype of x, dy, dx; W: dtype of gamma (float when not kAffine); C: 16-byte
// vectors (of T) per thread and row (per span with kStream); kPartials: dgamma/dbeta column
// sums into the workspace (affine only; off when only dx is asked for); tpr: threads of a
// row group, a multiple of 32 dividing blockDim.x.
template <typename T, typename W, int C, bool kVec, bool kAffine, bool kPartials, bool kStream>
__global__ void __launch_bounds__(kVec ? kMaxTpr : kScalarThreads, 1)
ln_bwd_rows(const LnBwdParams p, const int tpr) {
  constexpr int E = 16 / sizeof(T);
  static_assert(C * E <= kMaxPerThread, "register budget");
  static_assert(!kPartials || kAffine, "column sums need affine");
  extern __shared__ float4 smem[];        // [groups][2][np] column sums (not kStream)
  __shared__ float2 red[2][kMaxTpr / 32];  // [row parity][warp] partial row sums

  const int tid = threadIdx.x, t = tid % tpr, grp = tid / tpr;
  const int groups = blockDim.x / tpr, gwarps = tpr / 32;
  const int warp = tid / 32, lane = tid % 32;
  const int n = p.n, np = round_up(n, 8);
  const int chunk = tpr * E, span = C * chunk;
  const float inv_n = 1.f / float(n);
  const T *x = static_cast<const T *>(p.x);
  const T *dy = static_cast<const T *>(p.dy);
  const W *gamma = static_cast<const W *>(p.gamma);
  T *dx = static_cast<T *>(p.dx);
  float *acc = reinterpret_cast<float *>(smem) + int64_t(grp) * 2 * np;  // this group's
  float *wg = kPartials ? p.ws + int64_t(blockIdx.x) * 2 * np : nullptr;  // this block's
  const int64_t stride = int64_t(gridDim.x) * groups;
  int parity = 0;

  // Resident rows are loaded one row ahead: the next row's loads are in flight while this
  // row is reduced and stored, so a group keeps memory busy through its own barrier. Not
  // with 32 bytes of x a thread and the column sums: that spills at 64 registers.
  constexpr bool kPrefetch = !kStream && (C == 1 || sizeof(T) < 4 || !kPartials);
  Raw<T> xs[C], ds[C];  // the row as loaded (not kStream)
  int64_t row = int64_t(blockIdx.x) * groups + grp;
  if constexpr (kPrefetch) {
    if (row < p.rows) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        xs[c] = load_raw<T, kVec>(x + row * p.x_row, c * chunk, t, tpr, n);
        ds[c] = load_raw<T, kVec>(dy + row * p.dy_row, c * chunk, t, tpr, n);
      }
    }
  }

  for (; row < p.rows; row += stride) {
    const T *xr = x + row * p.x_row;
    const T *dyr = dy + row * p.dy_row;
    T *dxr = dx + row * p.dx_row;
    const float mu = p.mean[row], rs = p.rstd[row];
    const bool first = row < stride;  // this group's first row
    const int64_t next = row + stride;

    // pass 1: both row sums
    float sg = 0.f, sgx = 0.f;
    const int spans = kStream ? (n + span - 1) / span : 1;  // 1: provably one trip
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
          if constexpr (!kPrefetch) {
            xs[c] = load_raw<T, kVec>(xr, cb, t, tpr, n);
            ds[c] = load_raw<T, kVec>(dyr, cb, t, tpr, n);
          }
          xc = xs[c];
          dc = ds[c];
        }
        float gm[E], pg[E], dyv[E];
        load_gamma<W, E, kVec, kAffine>(gamma, cb, t, tpr, n, gm);
#pragma unroll
        for (int i = 0; i < E; ++i) {
          const float xhv = (to_f<T>(xc.e[i]) - mu) * rs;
          dyv[i] = to_f<T>(dc.e[i]);
          const float g = dyv[i] * gm[i];  // 0 past the end (dy = 0 there)
          sg += g;
          sgx += g * xhv;
          pg[i] = dyv[i] * xhv;
        }
        if constexpr (kPartials && !kStream && !kPrefetch) {  // fewer live registers here
          add_columns<E, kVec>(acc, cb, t, tpr, n, first, pg);
          add_columns<E, kVec>(acc + np, cb, t, tpr, n, first, dyv);
        }
      }
    }

    Raw<T> xn[C], dn[C];  // the next row, in flight from here (kPrefetch)
    if constexpr (kPrefetch) {
      if (next < p.rows) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
          xn[c] = load_raw<T, kVec>(x + next * p.x_row, c * chunk, t, tpr, n);
          dn[c] = load_raw<T, kVec>(dy + next * p.dy_row, c * chunk, t, tpr, n);
        }
      }
    }

    // one reduction of the pair (fixed butterfly: every thread ends with the same sums)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      sg += __shfl_xor_sync(kFullMask, sg, off);
      sgx += __shfl_xor_sync(kFullMask, sgx, off);
    }
    if (gwarps > 1) {  // uniform over the block
      // red[parity] is written again two rows later, after every reader of this row has
      // passed the next row's barrier: one barrier per row suffices
      if (lane == 0) red[parity][warp] = make_float2(sg, sgx);
      group_sync(1 + grp, tpr);
      sg = 0.f;
      sgx = 0.f;
      for (int w = grp * gwarps; w < (grp + 1) * gwarps; ++w) {
        const float2 v = red[parity][w];
        sg += v.x;
        sgx += v.y;
      }
      parity ^= 1;
    }
    const float c1 = sg * inv_n, c2 = sgx * inv_n;

    // pass 2: dx and the column sums (kStream: from a second read)
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
#pragma unroll
        for (int i = 0; i < E; ++i) {
          const float xhv = (to_f<T>(xc.e[i]) - mu) * rs;
          dyv[i] = to_f<T>(dc.e[i]);
          o[i] = rs * (dyv[i] * gm[i] - c1 - xhv * c2);
          pg[i] = dyv[i] * xhv;
        }
        store_chunk<T, E, kVec>(dxr, cb, t, tpr, n, o);
        if constexpr (kPartials && (kStream || kPrefetch)) {  // the group's row in shared
          // memory (kStream: one group a block, the block's workspace row in place)
          float *into = kStream ? wg : acc;
          add_columns<E, kVec>(into, cb, t, tpr, n, first, pg);
          add_columns<E, kVec>(into + np, cb, t, tpr, n, first, dyv);
        }
      }
    }

    if constexpr (kPrefetch) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        xs[c] = xn[c];
        ds[c] = dn[c];
      }
    }
  }

  // this block's workspace row: its groups' column sums in group order
  if constexpr (kPartials && !kStream) {
    __syncthreads();
    const int64_t left = p.rows - int64_t(blockIdx.x) * groups;  // groups with a row
    const int live = left < groups ? int(left) : groups;
    const float *base = reinterpret_cast<const float *>(smem);
    for (int j = tid; j < n; j += blockDim.x) {
      float s0 = 0.f, s1 = 0.f;
      for (int g = 0; g < live; ++g) {
        s0 += base[int64_t(g) * 2 * np + j];
        s1 += base[int64_t(g) * 2 * np + np + j];
      }
      wg[j] = s0;
      wg[np + j] = s1;
    }
  }
}

// Second stage: dgamma (blockIdx.y 0) and dbeta (1) of 32 columns per block from the
// workspace rows [parts][2][np]; 8 slices of
// the workspace rows (slice s takes parts s, s + 8, ...) in order, then the slices in order.
constexpr int kRedCols = 32, kRedSlices = 8;

template <typename W>
__global__ void __launch_bounds__(kRedCols * kRedSlices)
ln_bwd_cols(const LnBwdParams p, const int parts) {
  __shared__ float sh[kRedSlices][kRedCols + 1];
  const int lane = threadIdx.x % kRedCols, slice = threadIdx.x / kRedCols;
  const int which = blockIdx.y;
  const int n = p.n, np = round_up(n, 8);
  const int col = blockIdx.x * kRedCols + lane;
  float s = 0.f;
  if (col < n) {
    const float *w = p.ws + int64_t(which) * np + col;
#pragma unroll 4
    for (int r = slice; r < parts; r += kRedSlices) s += w[int64_t(r) * 2 * np];
  }
  sh[slice][lane] = s;
  __syncthreads();
  if (slice == 0 && col < n) {
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < kRedSlices; ++k) total += sh[k][lane];
    static_cast<W *>(which ? p.dbeta : p.dgamma)[col] = from_f<W>(total);
  }
}

bool aligned(const void *ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

int elem_size(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }

template <typename T, typename W, int C, bool kVec, bool kAffine, bool kPartials, bool kStream>
cudaError_t launch_one(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if constexpr (C * (16 / sizeof(T)) <= kMaxPerThread) {
    auto kernel = ln_bwd_rows<T, W, C, kVec, kAffine, kPartials, kStream>;
    if (plan.smem_bytes > 48 * 1024) {  // opt in above the default dynamic limit
      const cudaError_t err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem_bytes));
      if (err != cudaSuccess) return err;
    }
    kernel<<<plan.grid, plan.block, plan.smem_bytes, s>>>(p, plan.tpr);
    return cudaSuccess;
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

int pow2_ceil(int64_t v) {
  int c = 1;
  while (c < v) c *= 2;
  return c;
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
  const int max_tpr = plan.vectorized ? kMaxTpr : kScalarThreads;
  const int64_t n = p.n;
  plan.streamed = n > int64_t(max_tpr) * kMaxPerThread;
  plan.tpr = plan.streamed ? max_tpr
                           : std::max(32, pow2_ceil((n + kMaxPerThread - 1) / kMaxPerThread));
  // chunks of TPR * E columns: the whole row (resident) or a span (streamed)
  const int64_t chunk = int64_t(plan.tpr) * E;
  plan.chunks = plan.streamed ? std::max(1, kMaxPerThread / E) : pow2_ceil((n + chunk - 1) / chunk);
  const int threads = plan.vectorized ? std::max(plan.tpr, kGroupBlock) : kScalarThreads;
  const int groups = threads / plan.tpr;
  plan.block = dim3(unsigned(threads));
  // vector path: <= 64 registers a thread (launch bounds), 2048 threads an SM
  const int per_sm = plan.vectorized ? 2048 / threads : 2;
  const int64_t blocks = (p.rows + groups - 1) / groups;
  const int64_t cap = int64_t(std::max(sm_count, 1)) * per_sm;
  plan.parts = int(std::max<int64_t>(1, std::min(blocks, cap)));
  plan.grid = dim3(unsigned(plan.parts));
  plan.smem_bytes =
      (partials && !plan.streamed) ? size_t(groups) * 2 * layer_norm_ws_row(p.n) * sizeof(float)
                                   : 0;
  return plan;
}

cudaError_t layer_norm_bwd_launch(const LnBwdParams &p, const LnBwdPlan &plan,
                                  cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  if (p.ws && !p.affine) return cudaErrorInvalidValue;
  cudaError_t err;
  switch (p.x_dtype) {
    case DType::kFloat32: err = launch_typed<float>(p, plan, stream); break;
    case DType::kFloat16: err = launch_typed<__half>(p, plan, stream); break;
    case DType::kBFloat16: err = launch_typed<__nv_bfloat16>(p, plan, stream); break;
    default: return cudaErrorInvalidValue;
  }
  if (err != cudaSuccess) return err;
  err = cudaGetLastError();
  if (err != cudaSuccess || !p.ws) return err;
  const dim3 grid(unsigned((p.n + kRedCols - 1) / kRedCols), 2), block(kRedCols * kRedSlices);
  switch (p.w_dtype) {
    case DType::kFloat32: ln_bwd_cols<float><<<grid, block, 0, stream>>>(p, plan.parts); break;
    case DType::kFloat16: ln_bwd_cols<__half><<<grid, block, 0, stream>>>(p, plan.parts); break;
    case DType::kBFloat16:
      ln_bwd_cols<__nv_bfloat16><<<grid, block, 0, stream>>>(p, plan.parts);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
