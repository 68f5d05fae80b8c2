// LayerNorm backward over the last dimension from the saved fp32 mean and rstd,
// deterministic.
//
// Per row, with xhat = (x - mean) * rstd and g = dy * gamma (g = dy without affine):
//   dx = rstd * (g - sum(g)/N - xhat * sum(g * xhat)/N)       (the x-hat form, seed 002)
// and, with affine, dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
// All arithmetic in fp32, one rounding at the store. x and dy are read once per row (kept
// in registers between the two passes), and both row sums travel as one pair through one
// reduction (one synchronisation per row for block rows, none for warp rows).
//
// Tiling: a thread owns the same columns on every row it visits. With 16-byte vectors of
// E = 16 / sizeof(x) elements, chunk c of a row covers TPR * E columns and thread t holds
// columns c*TPR*E + t*E + i (vectorized) or c*TPR*E + i*TPR + t (scalar: coalesced
// single-element accesses), i < E. Three paths by N (C chunks; at most 32 elements per
// thread with 16-byte accesses, 16 with scalar ones; limits below for vectorized rows,
// halved for scalar rows):
//  - path 0, N <= 1024: one warp per row (TPR = 32), 8 rows per block of 256 threads,
//    row sums by warp shuffles only;
//  - path 1, N <= 8192: one block of 256 threads per row, row sums by shuffles and one
//    shared pair per warp (two barriers per row);
//  - path 2, longer rows: as path 1, but a row is processed in spans of C chunks, twice:
//    x, dy and gamma are read again for dx (from L2 for rows up to a few MB).
// Blocks walk rows with a grid stride (grid about 2-8 blocks per SM). dgamma/dbeta: each
// thread accumulates its columns over its rows in registers; a block's warps (path 0) are
// summed in a fixed order through shared memory; each block writes one workspace row
// ws[block][2][N] with plain stores (path 2 updates it in place, row by row: the same
// thread owns the same columns). A second kernel sums the workspace rows in a fixed order
// (8 interleaved slices, then the slices in order) and rounds once to gamma's dtype. No
// atomics: results are bitwise reproducible for a given device (the grid depends on the SM
// count).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../../common/csrc/convert.cuh"
#include "layer_norm_bwd.h"

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 256;      // threads of a block of the main kernel
// elements of a row held per thread (C * E): 32 with 16-byte accesses; 16 with scalar
// ones, whose per-element addresses and predicates cost registers (32 spilled)
constexpr int kMaxPerThread = 32, kMaxPerThreadScalar = 16;

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
template <int E, int TPR, bool kVec>
__device__ __forceinline__ int col_of(int cb, int t, int i) {
  return kVec ? cb + t * E + i : cb + i * TPR + t;
}

// The E elements of the chunk at column cb that thread t owns (zeros past the row's end).
template <typename V, int E, int TPR, bool kVec>
__device__ __forceinline__ void load_chunk(const V *row, int cb, int t, int n, float (&out)[E]) {
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
      const int col = cb + i * TPR + t;
      out[i] = col < n ? to_f<V>(row[col]) : 0.f;
    }
  }
}

template <typename T, int E, int TPR, bool kVec>
__device__ __forceinline__ void store_chunk(T *row, int cb, int t, int n, const float (&in)[E]) {
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
      const int col = cb + i * TPR + t;
      if (col < n) row[col] = from_f<T>(in[i]);
    }
  }
}

template <typename W, int E, int TPR, bool kVec, bool kAffine>
__device__ __forceinline__ void load_gamma(const W *gamma, int cb, int t, int n, float (&out)[E]) {
  if (kAffine) {
    load_chunk<W, E, TPR, kVec>(gamma, cb, t, n, out);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = 1.f;
  }
}

// Main kernel. T: dtype of x, dy, dx; W: dtype of gamma (float when not kAffine); TPR:
// threads per row (32 or 256); C: chunks per thread and span; kStream: rows longer than one
// span (path 2).
template <typename T, typename W, int TPR, int C, bool kVec, bool kAffine, bool kStream>
__global__ void __launch_bounds__(kThreads)
ln_bwd_rows(const LnBwdParams p) {
  constexpr int E = 16 / sizeof(T);
  constexpr int G = kThreads / TPR;  // rows of a block at a time
  constexpr int kChunk = TPR * E;    // columns of a chunk
  constexpr int kSpan = C * kChunk;  // columns of a span
  constexpr int kWarps = kThreads / 32;
  static_assert(TPR == 32 || TPR == kThreads, "a warp or a block per row");
  static_assert(!kStream || G == 1, "streamed rows are block rows");
  static_assert(C * E <= (kVec ? kMaxPerThread : kMaxPerThreadScalar), "register budget");

  const int tid = threadIdx.x, t = tid % TPR, grp = tid / TPR;
  const int lane = tid % 32, warp = tid / 32;
  const int n = p.n;
  const float inv_n = 1.f / float(n);
  const T *x = static_cast<const T *>(p.x);
  const T *dy = static_cast<const T *>(p.dy);
  const W *gamma = static_cast<const W *>(p.gamma);
  T *dx = static_cast<T *>(p.dx);
  // this block's workspace row (affine only; p.ws is null otherwise)
  float *wg = kAffine ? p.ws + int64_t(blockIdx.x) * 2 * n : nullptr;
  float *wb = kAffine ? wg + n : nullptr;

  float xh[C][E], dv[C][E];   // the row, kept between the passes (not kStream)
  float ag[C][E], ab[C][E];   // column partials of dy * xhat and dy (kAffine, not kStream)
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int i = 0; i < E; ++i) ag[c][i] = ab[c][i] = 0.f;

  for (int64_t row = int64_t(blockIdx.x) * G + grp; row < p.rows;
       row += int64_t(gridDim.x) * G) {  // uniform over a row's threads
    const T *xr = x + row * p.x_row;
    const T *dyr = dy + row * p.dy_row;
    T *dxr = dx + row * p.dx_row;
    const float mu = p.mean[row], rs = p.rstd[row];

    // pass 1: both row sums
    float sg = 0.f, sgx = 0.f;
    if constexpr (!kStream) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float xv[E], gm[E];
        load_chunk<T, E, TPR, kVec>(xr, c * kChunk, t, n, xv);
        load_chunk<T, E, TPR, kVec>(dyr, c * kChunk, t, n, dv[c]);
        load_gamma<W, E, TPR, kVec, kAffine>(gamma, c * kChunk, t, n, gm);
#pragma unroll
        for (int i = 0; i < E; ++i) {
          xh[c][i] = (xv[i] - mu) * rs;
          const float g = dv[c][i] * gm[i];  // 0 past the end (dy = 0 there)
          sg += g;
          sgx += g * xh[c][i];
        }
      }
    } else {
      for (int sb = 0; sb < n; sb += kSpan) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
          float xv[E], dyv[E], gm[E];
          load_chunk<T, E, TPR, kVec>(xr, sb + c * kChunk, t, n, xv);
          load_chunk<T, E, TPR, kVec>(dyr, sb + c * kChunk, t, n, dyv);
          load_gamma<W, E, TPR, kVec, kAffine>(gamma, sb + c * kChunk, t, n, gm);
#pragma unroll
          for (int i = 0; i < E; ++i) {
            const float g = dyv[i] * gm[i];
            sg += g;
            sgx += g * ((xv[i] - mu) * rs);
          }
        }
      }
    }

    // one reduction of the pair (fixed butterfly: every thread ends with the same sums)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      sg += __shfl_xor_sync(kFullMask, sg, off);
      sgx += __shfl_xor_sync(kFullMask, sgx, off);
    }
    if constexpr (TPR > 32) {
      __shared__ float2 red[kWarps];
      if (lane == 0) red[warp] = make_float2(sg, sgx);
      __syncthreads();
      sg = 0.f;
      sgx = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float2 v = red[w];
        sg += v.x;
        sgx += v.y;
      }
      __syncthreads();  // red is written again by the next row
    }
    const float c1 = sg * inv_n, c2 = sgx * inv_n;

    // pass 2: dx, and the column partials
    if constexpr (!kStream) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float gm[E], o[E];
        load_gamma<W, E, TPR, kVec, kAffine>(gamma, c * kChunk, t, n, gm);
#pragma unroll
        for (int i = 0; i < E; ++i) {
          o[i] = rs * (dv[c][i] * gm[i] - c1 - xh[c][i] * c2);
          if (kAffine) {
            ag[c][i] += dv[c][i] * xh[c][i];  // 0 past the end
            ab[c][i] += dv[c][i];
          }
        }
        store_chunk<T, E, TPR, kVec>(dxr, c * kChunk, t, n, o);
      }
    } else {
      const bool first = row == int64_t(blockIdx.x);  // this block's first row (G == 1)
      for (int sb = 0; sb < n; sb += kSpan) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const int cb = sb + c * kChunk;
          float xv[E], dyv[E], gm[E], o[E];
          load_chunk<T, E, TPR, kVec>(xr, cb, t, n, xv);
          load_chunk<T, E, TPR, kVec>(dyr, cb, t, n, dyv);
          load_gamma<W, E, TPR, kVec, kAffine>(gamma, cb, t, n, gm);
#pragma unroll
          for (int i = 0; i < E; ++i) {
            const float xhv = (xv[i] - mu) * rs;
            o[i] = rs * (dyv[i] * gm[i] - c1 - xhv * c2);
            if (kAffine) {
              const int col = col_of<E, TPR, kVec>(cb, t, i);
              if (col < n) {  // owned by this thread on every row: no race
                wg[col] = first ? dyv[i] * xhv : wg[col] + dyv[i] * xhv;
                wb[col] = first ? dyv[i] : wb[col] + dyv[i];
              }
            }
          }
          store_chunk<T, E, TPR, kVec>(dxr, cb, t, n, o);
        }
      }
    }
  }

  // this block's workspace row
  if constexpr (kAffine && !kStream) {
    if constexpr (G == 1) {
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int i = 0; i < E; ++i) {
          const int col = col_of<E, TPR, kVec>(c * kChunk, t, i);
          if (col < n) {
            wg[col] = ag[c][i];
            wb[col] = ab[c][i];
          }
        }
    } else {
      // the G row groups (warps) own the same columns: sum them in group order
      __shared__ float sred[2][G][kChunk];
#pragma unroll
      for (int c = 0; c < C; ++c) {
#pragma unroll
        for (int i = 0; i < E; ++i) {
          const int l = col_of<E, TPR, kVec>(0, t, i);  // position inside the chunk
          sred[0][grp][l] = ag[c][i];
          sred[1][grp][l] = ab[c][i];
        }
        __syncthreads();
        for (int k = tid; k < 2 * kChunk; k += kThreads) {
          const int which = k / kChunk, l = k % kChunk;
          float s = 0.f;
#pragma unroll
          for (int g = 0; g < G; ++g) s += sred[which][g][l];
          const int col = c * kChunk + l;
          if (col < n) (which ? wb : wg)[col] = s;
        }
        __syncthreads();
      }
    }
  }
}

// Second stage: dgamma (blockIdx.y 0) and dbeta (1) of 32 columns per block; 8 slices of
// the workspace rows (slice s takes parts s, s + 8, ...) in order, then the slices in order.
constexpr int kRedCols = 32, kRedSlices = 8;

template <typename W>
__global__ void __launch_bounds__(kRedCols * kRedSlices)
ln_bwd_cols(const LnBwdParams p, const int parts) {
  __shared__ float sh[kRedSlices][kRedCols + 1];
  const int lane = threadIdx.x % kRedCols, slice = threadIdx.x / kRedCols;
  const int which = blockIdx.y;
  const int n = p.n;
  const int col = blockIdx.x * kRedCols + lane;
  float s = 0.f;
  if (col < n) {
    const float *w = p.ws + int64_t(which) * n + col;
#pragma unroll 4
    for (int r = slice; r < parts; r += kRedSlices) s += w[int64_t(r) * 2 * n];
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

template <typename T, typename W, int TPR, int C, bool kVec, bool kAffine, bool kStream>
cudaError_t launch_one(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if constexpr (C * (16 / sizeof(T)) <= (kVec ? kMaxPerThread : kMaxPerThreadScalar)) {
    ln_bwd_rows<T, W, TPR, C, kVec, kAffine, kStream><<<plan.grid, plan.block, 0, s>>>(p);
    return cudaSuccess;
  } else {
    return cudaErrorInvalidValue;  // the plan never asks for it
  }
}

template <typename T, typename W, bool kAffine, bool kVec>
cudaError_t launch_path(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  switch (plan.path * 16 + plan.chunks) {
    case 0 * 16 + 1: return launch_one<T, W, 32, 1, kVec, kAffine, false>(p, plan, s);
    case 0 * 16 + 2: return launch_one<T, W, 32, 2, kVec, kAffine, false>(p, plan, s);
    case 0 * 16 + 4: return launch_one<T, W, 32, 4, kVec, kAffine, false>(p, plan, s);
    case 0 * 16 + 8: return launch_one<T, W, 32, 8, kVec, kAffine, false>(p, plan, s);
    case 1 * 16 + 1: return launch_one<T, W, kThreads, 1, kVec, kAffine, false>(p, plan, s);
    case 1 * 16 + 2: return launch_one<T, W, kThreads, 2, kVec, kAffine, false>(p, plan, s);
    case 1 * 16 + 4: return launch_one<T, W, kThreads, 4, kVec, kAffine, false>(p, plan, s);
    case 1 * 16 + 8: return launch_one<T, W, kThreads, 8, kVec, kAffine, false>(p, plan, s);
    case 2 * 16 + 2: return launch_one<T, W, kThreads, 2, kVec, kAffine, true>(p, plan, s);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, typename W, bool kAffine>
cudaError_t launch_affine(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  return plan.vectorized ? launch_path<T, W, kAffine, true>(p, plan, s)
                         : launch_path<T, W, kAffine, false>(p, plan, s);
}

template <typename T>
cudaError_t launch_typed(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if (!p.affine) return launch_affine<T, float, false>(p, plan, s);
  if (p.w_dtype == DType::kFloat32) return launch_affine<T, float, true>(p, plan, s);
  if (elem_size(p.w_dtype) != sizeof(T)) return cudaErrorInvalidValue;
  if (p.w_dtype != p.x_dtype) return cudaErrorInvalidValue;  // gamma: fp32 or x's dtype
  return launch_affine<T, T, true>(p, plan, s);
}

// Smallest power of two C (at most cmax) with lanes * C * E >= n.
int pick_chunks(int64_t n, int lanes, int E, int cmax) {
  int c = 1;
  while (c < cmax && int64_t(lanes) * c * E < n) c *= 2;
  return c;
}

}  // namespace

LnBwdPlan layer_norm_bwd_plan(const LnBwdParams &p, int sm_count) {
  LnBwdPlan plan{};
  const int es = elem_size(p.x_dtype);
  const int E = 16 / es;
  plan.vectorized = aligned(p.x, 16) && aligned(p.dy, 16) && aligned(p.dx, 16) &&
                    (!p.affine || aligned(p.gamma, 16)) && p.x_row % E == 0 &&
                    p.dy_row % E == 0 && p.dx_row % E == 0;
  // chunks per thread: 32 elements (16-byte accesses) or 16 (scalar accesses) at most:
  // vectorized 1024 columns per warp row, 8192 per block row (fp32 and 16-bit alike);
  // scalar 512 and 4096
  const int cmax = (plan.vectorized ? kMaxPerThread : kMaxPerThreadScalar) / E;
  const int64_t n = p.n;
  if (n <= int64_t(32) * E * cmax) {
    plan.path = 0;
    plan.chunks = pick_chunks(n, 32, E, cmax);
  } else if (n <= int64_t(kThreads) * E * cmax) {
    plan.path = 1;
    plan.chunks = pick_chunks(n, kThreads, E, cmax);
  } else {
    plan.path = 2;
    plan.chunks = 2;
  }
  const int rows_per_block = plan.path == 0 ? kThreads / 32 : 1;
  const int64_t groups = (p.rows + rows_per_block - 1) / rows_per_block;
  // every block adds a workspace row of 2 N floats: few blocks with affine, more without
  const int per_sm = !p.affine ? 8 : (plan.chunks == 1 ? 4 : 2);
  const int64_t cap = int64_t(std::max(sm_count, 1)) * per_sm;
  plan.parts = int(std::max<int64_t>(1, std::min(groups, cap)));
  plan.grid = dim3(unsigned(plan.parts));
  plan.block = dim3(kThreads);
  return plan;
}

cudaError_t layer_norm_bwd_launch(const LnBwdParams &p, const LnBwdPlan &plan,
                                  cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  cudaError_t err;
  switch (p.x_dtype) {
    case DType::kFloat32: err = launch_typed<float>(p, plan, stream); break;
    case DType::kFloat16: err = launch_typed<__half>(p, plan, stream); break;
    case DType::kBFloat16: err = launch_typed<__nv_bfloat16>(p, plan, stream); break;
    default: return cudaErrorInvalidValue;
  }
  if (err != cudaSuccess) return err;
  err = cudaGetLastError();
  if (err != cudaSuccess || !p.affine) return err;
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
