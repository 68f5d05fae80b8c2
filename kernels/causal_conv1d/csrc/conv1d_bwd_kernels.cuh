// Device code shared by the causal conv1d backward's kernels (one .cu a job): weights,
// vector accesses, the SiLU gradient, and inputs, sequence ids and dfinal_states at a time
// step. In an anonymous namespace, as the kernels are: each .cu has its own copy.
//
// Per output t: pre = bias + sum_k M(t,k) w[k] xc[t+k] (xc = [initial states, x]),
// g' = dout * silu'(pre) (or dout), zero at padding ids; dx[p] gathers w[k] g'[p+H-k]
// (H = K-1), plus the dfinal_states copy path for the last H steps; dweight/dbias are
// sums of g' * x and g' over batch and time. All arithmetic in fp32, one rounding at the
// store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/convert.cuh"
#include "conv1d_bwd.h"

namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// Weight and bias dtype is a run-time property (fp32 or the activation dtype): K + 1
// scalars a channel, read under one switch, not worth a template dimension.
template <typename W, int K>
__device__ __forceinline__ void load_weights_as(const ConvBwdParams &p, int c, float (&w)[K],
                                                float &bias) {
  const W *wp = static_cast<const W *>(p.weight) + c * p.w_d;
#pragma unroll
  for (int k = 0; k < K; ++k) w[k] = to_f<W>(wp[k * p.w_k]);
  bias = p.has_bias ? to_f<W>(static_cast<const W *>(p.bias)[c * p.bias_d]) : 0.f;
}
template <int K>
__device__ __forceinline__ void load_weights(const ConvBwdParams &p, int c, float (&w)[K],
                                             float &bias) {
  switch (p.w_dtype) {
    case DType::kFloat16: load_weights_as<__half, K>(p, c, w, bias); break;
    case DType::kBFloat16: load_weights_as<__nv_bfloat16, K>(p, c, w, bias); break;
    default: load_weights_as<float, K>(p, c, w, bias);
  }
}

template <int BYTES> struct VecBits;
template <> struct VecBits<8> { using type = uint2; };
template <> struct VecBits<16> { using type = uint4; };

// N contiguous elements of T as floats (one vector access).
template <typename T, int N>
__device__ __forceinline__ void load_vec(const T *ptr, float (&out)[N]) {
  using V = typename VecBits<N * sizeof(T)>::type;
  union { V v; T e[N]; } u;
  u.v = *reinterpret_cast<const V *>(ptr);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f<T>(u.e[i]);
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T *ptr, const float (&in)[N]) {
  using V = typename VecBits<N * sizeof(T)>::type;
  union { V v; T e[N]; } u;
#pragma unroll
  for (int i = 0; i < N; ++i) u.e[i] = from_f<T>(in[i]);
  *reinterpret_cast<V *>(ptr) = u.v;
}

__device__ __forceinline__ float silu_grad(float g, float pre) {
  const float s = 1.f / (1.f + __expf(-pre));
  return g * s * (1.f + pre * (1.f - s));
}

// Input at time t (may be < 0: initial states or zeros; >= L: zeros).
template <typename T>
__device__ __forceinline__ float x_at(const ConvBwdParams &p, int b, int c, int t) {
  if (t >= p.seqlen) return 0.f;
  if (t >= 0) return to_f<T>(static_cast<const T *>(p.x)[b * p.x_b + c * p.x_d + t * p.x_t]);
  if (!p.has_init) return 0.f;
  const int slot = t + p.width - 1;
  return to_f<T>(static_cast<const T *>(p.init)[b * p.init_b + c * p.init_d + slot * p.init_t]);
}

// Sequence id at time t: the initial-state slots carry the id of step 0 (or -1 without
// initial states), steps past the end are -1.
__device__ __forceinline__ int id_at(const ConvBwdParams &p, int b, int t) {
  if (!p.has_seq_idx) return 0;
  if (t >= p.seqlen) return -1;
  if (t < 0) return p.has_init ? p.seq_idx[b * p.seq_b] : -1;
  return p.seq_idx[b * p.seq_b + t * p.seq_t];
}

template <typename T>
__device__ __forceinline__ float dfinal_at(const ConvBwdParams &p, int b, int c, int j) {
  return to_f<T>(static_cast<const T *>(p.dfinal)[b * p.dfinal_b + c * p.dfinal_d + j * p.dfinal_t]);
}

}  // namespace
