// Device code shared by the LayerNorm backward's row kernels (layer_norm_bwd_piped.cu,
// layer_norm_bwd_rows.cu): a row's chunks as loaded and stored, the two row sums, dx and
// the dgamma/dbeta terms of a chunk, and the block's column sums into its workspace row.
// In an anonymous namespace, as the kernels are: each .cu has its own copy.
//
// Per row, with xhat = (x - mean) * rstd and g = dy * gamma (g = dy without affine):
//   dx = rstd * (g - sum(g)/N - xhat * sum(g * xhat)/N)       (the x-hat form, seed 002)
// and, with affine, dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
// All arithmetic in fp32, one rounding at the store. x and dy are read once per row (kept
// as loaded between the two passes, xhat and g recomputed), and both row sums travel as
// one pair through one reduction (one synchronisation of the row's threads per row).
//
// Chunks. With 16-byte vectors of E = 16 / sizeof(x) elements, chunk c of a row covers
// TPR * E columns and thread t of the row group holds columns c*TPR*E + t*E + i
// (vectorized) or c*TPR*E + i*TPR + t (scalar: coalesced single-element accesses), i < E.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/convert.cuh"
#include "layer_norm_bwd.h"
#include "layer_norm_bwd_launchers.h"

namespace {

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
// held there, and ln_bwd_cols drops their sums): a warp store is 512 contiguous bytes, and
// the row is written sooner than at one float a thread (docs/benchmark-history.md).
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
    // g rounded as sums_chunk rounds it (no fused multiply-add): g - c1 then cancels
    // exactly where it should (one column: c1 = g), instead of leaving the product's
    // rounding error, which rstd (up to 1/sqrt(eps)) amplifies
    o[i] = rs * (__fmul_rn(dyv[i], gm[i]) - c1 - xhv * c2);
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
    const float g = __fmul_rn(to_f<T>(dc.e[i]), gm[i]);  // rounded, as dx_chunk's
    s.x += g;
    s.y += g * xhv;
  }
}

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
  return cudaGetLastError();
}

}  // namespace
