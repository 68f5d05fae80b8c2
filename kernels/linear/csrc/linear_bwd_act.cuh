// The activations and their derivatives in fp32, as golden/linear.py states them, shared by
// the elementwise jobs; and the walk over a strided matrix they share (map_walk, launch_walk).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "../../common/csrc/convert.cuh"
#include "linear_bwd.h"
#include "linear_bwd_launchers.h"

namespace linear_bwd {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kTanhA = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

// tanh from one exponential: --use_fast_math (our build's flags) turns tanhf into
// tanh.approx.f32, about 2^-11 off, which fp32 cases would see in the GELU's derivative;
// expf becomes ex2.approx, about 2^-22 off. Saturates to +-1 for large |u|.
__device__ __forceinline__ float tanh_exp(float u) { return 1.f - 2.f / (expf(2.f * u) + 1.f); }

template <int kAct> __device__ __forceinline__ float act_f(float z) {
  if constexpr (kAct == static_cast<int>(Act::kRelu)) {
    return z > 0.f ? z : 0.f;
  } else if constexpr (kAct == static_cast<int>(Act::kSilu)) {
    return z / (1.f + expf(-z));
  } else if constexpr (kAct == static_cast<int>(Act::kGeluTanh)) {
    return 0.5f * z * (1.f + tanh_exp(kSqrt2OverPi * (z + kTanhA * z * z * z)));
  } else if constexpr (kAct == static_cast<int>(Act::kGelu)) {
    return 0.5f * z * (1.f + erff(z * kInvSqrt2));
  } else {
    return z;
  }
}

template <int kAct> __device__ __forceinline__ float dact_f(float z) {
  if constexpr (kAct == static_cast<int>(Act::kRelu)) {
    return z > 0.f ? 1.f : 0.f;
  } else if constexpr (kAct == static_cast<int>(Act::kSilu)) {
    const float s = 1.f / (1.f + expf(-z));
    return s * (1.f + z * (1.f - s));
  } else if constexpr (kAct == static_cast<int>(Act::kGeluTanh)) {
    const float t = tanh_exp(kSqrt2OverPi * (z + kTanhA * z * z * z));
    return 0.5f * (1.f + t) +
           0.5f * z * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kTanhA * z * z);
  } else if constexpr (kAct == static_cast<int>(Act::kGelu)) {
    return 0.5f * (1.f + erff(z * kInvSqrt2)) + z * kInvSqrt2Pi * expf(-0.5f * z * z);
  } else {
    return 1.f;
  }
}

// The walk over a rows x cols matrix in the memory order of `out` (walks_columns,
// linear_bwd.h): threads along its contiguous dimension, consecutive threads at consecutive
// addresses of out and of every operand stored like it; blocks along the other (grid.y).
__host__ __device__ __forceinline__ bool walks_columns(const Strided &out, int64_t cols) {
  return walks_columns(out.row_stride, out.col_stride, cols);
}

template <typename F>
__device__ __forceinline__ void for_each_element(const Strided &out, int64_t rows,
                                                 int64_t cols, F &&f) {
  const bool by_cols = walks_columns(out, cols);
  const int64_t inner = by_cols ? rows : cols, outer = by_cols ? cols : rows;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y)
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < inner;
         e += int64_t(gridDim.x) * blockDim.x) {
      if (by_cols) f(e, o);
      else f(o, e);
    }
}

// The packed walk (packed_walk, linear_bwd_launchers.h): f(i, j) for the first element of
// every pack of kPackBytes along the walk's direction.
template <typename T, typename F>
__device__ __forceinline__ void for_each_pack(const Strided &out, int64_t rows, int64_t cols,
                                              F &&f) {
  constexpr int kVec = kPackBytes / sizeof(T);
  const bool by_cols = walks_columns(out, cols);
  const int64_t inner = (by_cols ? rows : cols) / kVec, outer = by_cols ? cols : rows;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y)
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < inner;
         e += int64_t(gridDim.x) * blockDim.x) {
      if (by_cols) f(e * kVec, o);
      else f(o, e * kVec);
    }
}

template <typename T> struct alignas(kPackBytes) Pack {
  T v[kPackBytes / sizeof(T)];
};

template <typename T>
__device__ __forceinline__ T *at(const Strided &s, int64_t i, int64_t j) {
  return static_cast<T *>(s.ptr) + i * s.row_stride + j * s.col_stride;
}

namespace detail {
// a pack's v-th values converted last operand first: the order of the machine code the GPU
// tests verified (scripts/same_machine_code.py shows it byte-identical); any order is exact
template <typename T, typename F, size_t... K>
__device__ __forceinline__ T map_pack(F &f, const Pack<T> *p, int v, std::index_sequence<K...>) {
  constexpr size_t n = sizeof...(K);
  const float x[] = {to_f(p[n - 1 - K].v[v])...};
  return from_f<T>(f(x[n - 1 - K]...));
}
template <typename T, typename F, size_t... K>
__device__ __forceinline__ T map_one(F &f, const float *x, std::index_sequence<K...>) {
  return from_f<T>(f(x[K]...));
}
}  // namespace detail

// out(i, j) = f(ins(i, j)...) over the whole matrix, in fp32 with one rounding at the store:
// kPacked, kPackBytes a thread on the packed walk (the launcher checked packed_walk), else
// one element a thread. The operands are loaded in their order (a braced list's).
template <typename T, bool kPacked, typename F, typename... Ins>
__device__ __forceinline__ void map_walk(const Strided &out, int64_t rows, int64_t cols, F f,
                                         const Ins &...ins) {
  using Order = std::index_sequence_for<Ins...>;
  if constexpr (kPacked) {
    for_each_pack<T>(out, rows, cols, [&](int64_t i, int64_t j) {
      const Pack<T> p[] = {*reinterpret_cast<const Pack<T> *>(at<const T>(ins, i, j))...};
      Pack<T> o;
#pragma unroll
      for (int v = 0; v < kPackBytes / int(sizeof(T)); ++v)
        o.v[v] = detail::map_pack<T>(f, p, v, Order{});
      *reinterpret_cast<Pack<T> *>(at<T>(out, i, j)) = o;
    });
  } else {
    for_each_element(out, rows, cols, [&](int64_t i, int64_t j) {
      const float x[] = {to_f(*at<const T>(ins, i, j))...};
      *at<T>(out, i, j) = detail::map_one<T>(f, x, Order{});
    });
  }
}

// vec: elements a thread moves at once (the packed walk's pack), 1 on the scalar walk.
inline dim3 grid_for(const Strided &out, int64_t rows, int64_t cols, int vec = 1) {
  const bool by_cols = walks_columns(out, cols);
  const int64_t inner = (by_cols ? rows : cols) / vec, outer = by_cols ? cols : rows;
  const int64_t x = (inner + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(x < kMaxBlocks ? (x > 0 ? x : 1) : kMaxBlocks),
              static_cast<unsigned>(outer < kMaxGridY ? (outer > 0 ? outer : 1) : kMaxGridY));
}

// Launches a map_walk kernel on the walk the operands allow: launch(packed, grid), packed a
// std::bool_constant naming the kernel's kPacked. Then the launch's error, if any.
template <typename T, typename Launch>
cudaError_t launch_walk(const Strided &out, std::initializer_list<Strided> ins, int64_t rows,
                        int64_t cols, Launch &&launch) {
  if (rows * cols == 0) return cudaSuccess;
  if (packed_walk(out, ins, rows, cols, sizeof(T)))
    launch(std::true_type{}, grid_for(out, rows, cols, kPackBytes / sizeof(T)));
  else
    launch(std::false_type{}, grid_for(out, rows, cols));
  return cudaGetLastError();
}

}  // namespace linear_bwd
