// Device code shared by the softmax backward's kernels (softmax_bwd_rows.cu,
// softmax_bwd_split.cu): a row's chunks as loaded and stored, the dropout mask, the dot of
// g and y, dx of a vector, and the fixed-order row sum. In an anonymous namespace, as the
// kernels are: each .cu has its own copy.
//
// Per row of length N: g = dy * keep * scale (or dy), dot = sum_j g_j y_j,
// dx = y * (g - dot). All arithmetic in fp32, dx rounded once at the store.
//
// Memory access. Vector path (y, dy, dx 16-byte aligned rows, the mask V-byte aligned):
// thread t of the row reads the 16-byte vector (c x TPR + t) of chunk c; a partial last
// vector (N not a multiple of V) is read and written element by element. Scalar path
// (rows not aligned, e.g. N odd): element c x TPR x V + i x TPR + t, coalesced per i.
// The last dimension must be contiguous (the binding checks); row strides are free.
// Offsets are 64-bit (rows x N may exceed 2^31) but in the lean block rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/reduce.cuh"
#include "softmax_bwd.h"
#include "softmax_bwd_launchers.h"

namespace {

// V = 16 / sizeof(T) elements in one 16-byte word
template <typename T> struct Vec {
  static constexpr int V = 16 / sizeof(T);
  union {
    uint4 raw;
    T e[16 / sizeof(T)];
  };
};

// the V keep bytes of one vector: 4 bytes (fp32) or 8 (16-bit)
template <int V> struct MaskBits;
template <> struct MaskBits<4> { using type = uint32_t; };
template <> struct MaskBits<8> { using type = uint2; };
template <int V> struct MaskVec {
  union {
    typename MaskBits<V>::type raw;
    uint8_t b[V];
  };
};

// Chunk starting at row element `base`: this thread's V elements of y, dy (and the mask);
// elements at or past n read as zeros.
template <typename T, bool kVec, bool kDrop, typename Idx>
__device__ __forceinline__ void load_chunk(const T *__restrict__ y, const T *__restrict__ dy,
                                           const uint8_t *__restrict__ mk, Idx base,
                                           int tid, int tpr, Idx n, Vec<T> &yv,
                                           Vec<T> &dv, MaskVec<Vec<T>::V> &mv) {
  constexpr int V = Vec<T>::V;
  using MaskT = typename MaskBits<V>::type;
  if (kVec) {
    const Idx e0 = base + Idx(tid) * V;
    if (e0 + V <= n) {
      yv.raw = __ldg(reinterpret_cast<const uint4 *>(y + e0));
      dv.raw = __ldg(reinterpret_cast<const uint4 *>(dy + e0));
      if (kDrop) mv.raw = __ldg(reinterpret_cast<const MaskT *>(mk + e0));
      return;
    }
    yv.raw = make_uint4(0u, 0u, 0u, 0u);
    dv.raw = make_uint4(0u, 0u, 0u, 0u);
    if (kDrop) mv.raw = MaskT{};
#pragma unroll
    for (int i = 0; i < V; ++i) {
      if (e0 + i < n) {
        yv.e[i] = y[e0 + i];
        dv.e[i] = dy[e0 + i];
        if (kDrop) mv.b[i] = mk[e0 + i];
      }
    }
  } else {
    yv.raw = make_uint4(0u, 0u, 0u, 0u);
    dv.raw = make_uint4(0u, 0u, 0u, 0u);
    if (kDrop) mv.raw = MaskT{};
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const Idx e = base + Idx(i) * tpr + tid;
      if (e < n) {
        yv.e[i] = y[e];
        dv.e[i] = dy[e];
        if (kDrop) mv.b[i] = mk[e];
      }
    }
  }
}

// Dropped elements of dy become +0, so that g = dy * scale afterwards equals
// dy * keep * scale (the golden's form) without keeping the mask in registers.
template <typename T>
__device__ __forceinline__ void apply_mask(Vec<T> &dv, const MaskVec<Vec<T>::V> &mv) {
#pragma unroll
  for (int i = 0; i < Vec<T>::V; ++i)
    if (mv.b[i] == 0) dv.e[i] = from_f<T>(0.f);
}

template <typename T, bool kDrop>
__device__ __forceinline__ float grad(T d, float scale) {
  return kDrop ? to_f<T>(d) * scale : to_f<T>(d);
}

// sum of g * y over the vector, in element order, onto acc
template <typename T, bool kDrop>
__device__ __forceinline__ float dot_vec(const Vec<T> &yv, const Vec<T> &dv, float scale,
                                         float acc) {
#pragma unroll
  for (int i = 0; i < Vec<T>::V; ++i)
    acc = fmaf(grad<T, kDrop>(dv.e[i], scale), to_f<T>(yv.e[i]), acc);
  return acc;
}

// dx = y * (g - dot) of one vector, rounded once
template <typename T, bool kDrop>
__device__ __forceinline__ void dx_vec(const Vec<T> &yv, const Vec<T> &dv, float scale,
                                       float dot, Vec<T> &o) {
#pragma unroll
  for (int i = 0; i < Vec<T>::V; ++i)
    o.e[i] = from_f<T>(to_f<T>(yv.e[i]) * (grad<T, kDrop>(dv.e[i], scale) - dot));
}

// dx of the chunk at `base`, elements past n not written
template <typename T, bool kVec, bool kDrop, typename Idx>
__device__ __forceinline__ void store_chunk(T *__restrict__ dx, Idx base, int tid, int tpr,
                                            Idx n, const Vec<T> &yv, const Vec<T> &dv,
                                            float scale, float dot) {
  constexpr int V = Vec<T>::V;
  Vec<T> o;
  dx_vec<T, kDrop>(yv, dv, scale, dot, o);
  if (kVec) {
    const Idx e0 = base + Idx(tid) * V;
    if (e0 + V <= n) {
      *reinterpret_cast<uint4 *>(dx + e0) = o.raw;
      return;
    }
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (e0 + i < n) dx[e0 + i] = o.e[i];
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const Idx e = base + Idx(i) * tpr + tid;
      if (e < n) dx[e] = o.e[i];
    }
  }
}

// Fixed-order row sum (reduce.cuh). The xor butterfly leaves the same bits in every lane
// (each step adds the same two values, in either order). Block: warp w's sum goes to slot
// w; then every warp sums the slots by the same butterfly (kTree: 5 dependent steps), or
// every thread adds slot 0, slot 1, ... in that order.
template <bool kWarp, bool kTree>
__device__ __forceinline__ float row_sum(float v) {
  v = rowsum::warp_sum(v);
  if (kWarp) return v;
  __shared__ float part[kC1Threads / 32];
  const auto slots = rowsum::warp_slots(part);
  slots.put(v);
  const int nw = blockDim.x / 32;
  if (kTree) return rowsum::partials_sum(part, nw, int(threadIdx.x % 32));
  return slots.reduce_onto(0.f, nw);
}

}  // namespace
