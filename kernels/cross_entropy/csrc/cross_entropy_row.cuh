// The per-row arithmetic both cross-entropy row kernels share (cross_entropy_rows.cu
// streams a row twice, cross_entropy_resident.cu holds it in shared memory): the target
// after the shift, (max, sum of exp) partials and their fixed-order merge (through
// reduce.cuh), the softcap, 16-byte element vectors, and the loss and gradient of one row
// from its statistics.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/reduce.cuh"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"

namespace ce {

constexpr float kLog2e = 1.4426950408889634f;

// The target row `row` is scored against (the shift: the next position's label within
// its sequence, ignore_index at a sequence's last position).
__device__ __forceinline__ int64_t target_of(const CrossEntropyParams &p, int64_t row) {
  if (!p.shift) return p.targets[row];
  if ((row + 1) % p.seq_len == 0) return p.ignore_index;
  return p.targets[row + 1];
}

// (max, sum of exp(x - max)) pairs merged; commutative, so a butterfly leaves the same
// bits in every lane.
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;  // both empty
  s = s * exp2f((m - mm) * kLog2e) + s2 * exp2f((m2 - mm) * kLog2e);
  m = mm;
}

// A row's partial statistics: max, sum of exp(x - max), sum of x - x0 (label smoothing;
// x0 the row's first logit: logits far from 0 with a small spread, a z-loss's target,
// summed as they are would lose their spread to the sum's rounding).
struct Partial {
  float m = -INFINITY, s = 0.f, sx = 0.f;
};

// A warp's partial in its slots (PartialSlots): field f at f[w].
struct PartialAt {
  const float *m, *s, *sx;
  int w;
  __device__ __forceinline__ operator Partial() const { return Partial{m[w], s[w], sx[w]}; }
};

// The warps' partials in shared memory (rowsum::WarpSlots), a float array a field.
struct PartialSlots {
  using value_type = Partial;
  float *m, *s, *sx;
  __device__ __forceinline__ void store_if(bool cond, int w, const Partial &a) const {
    if (cond) {
      m[w] = a.m;
      s[w] = a.s;
      sx[w] = a.sx;
    }
  }
  __device__ __forceinline__ PartialAt at(int w) const { return {m, s, sx, w}; }
};

// Partials merged, rowsum's reduction step: the (max, sum) pairs by merge, the sums of x
// added; with another lane's partial (each field's shuffle where it is used) or with a
// warp's slots (each field read where it is used).
struct MergeStep {
  __device__ __forceinline__ void with_lane(Partial &a, int off) const {
    merge(a.m, a.s, __shfl_xor_sync(0xffffffffu, a.m, off),
          __shfl_xor_sync(0xffffffffu, a.s, off));
    a.sx += __shfl_xor_sync(0xffffffffu, a.sx, off);
  }
  __device__ __forceinline__ void operator()(Partial &a, const PartialAt &b) const {
    merge(a.m, a.s, b.m[b.w], b.s[b.w]);
    a.sx += b.sx[b.w];
  }
};

// The block's partials merged in a fixed order (an xor butterfly per warp, then the warps
// in order: reduce.cuh), in every thread: the same bits everywhere, run after run.
__device__ __forceinline__ Partial block_merge(Partial a) {
  __shared__ float sm_m[kMaxThreads / 32], sm_s[kMaxThreads / 32], sm_x[kMaxThreads / 32];
  const rowsum::WarpSlots<PartialSlots> slots{{sm_m, sm_s, sm_x}};
  const int warps = slots.put(rowsum::warp_reduce(a, MergeStep{}));
  return slots.reduce(warps, MergeStep{});
}

// c tanh(x / c) in double: under --use_fast_math tanhf is the hardware approximation
// (about 11 bits), and the softcap's logits feed every exp of the row
__device__ __forceinline__ double tanh_of(float x, float cap) {
  return tanh(double(x) / double(cap));
}
__device__ __forceinline__ float capped(float x, float cap) {
  return float(double(cap) * tanh_of(x, cap));
}

// The row's first logit (capped), the offset of the smoothing sum (Partial.sx).
template <typename T, bool kCap>
__device__ __forceinline__ float first_logit(const T *row, float cap) {
  const float v = to_f(row[0]);
  return kCap ? capped(v, cap) : v;
}

// The kN elements of one 16-byte vector, in fp32 (pack: back, rounded once).
template <typename T, int kN>
__device__ __forceinline__ void unpack(const uint4 &raw, float (&v)[kN]) {
  const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
  for (int j = 0; j < kN; ++j) v[j] = to_f(e[j]);
}

template <typename T, int kN>
__device__ __forceinline__ uint4 pack(const float (&g)[kN]) {
  uint4 raw;
  if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
    // two elements a conversion instruction (cvt.rn.bf16x2.f32), the same rounding
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    T2 *e = reinterpret_cast<T2 *>(&raw);
#pragma unroll
    for (int j = 0; j < kN / 2; ++j) {
      if constexpr (std::is_same_v<T, __half>) e[j] = __floats2half2_rn(g[2 * j], g[2 * j + 1]);
      else e[j] = __floats2bfloat162_rn(g[2 * j], g[2 * j + 1]);
    }
  } else {
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int j = 0; j < kN; ++j) e[j] = from_f<T>(g[j]);
  }
  return raw;
}

// The softcap applied to kN raw logits, in place.
template <int kN>
__device__ __forceinline__ void cap_all(float (&v)[kN], float cap) {
#pragma unroll
  for (int j = 0; j < kN; ++j) v[j] = capped(v[j], cap);
}

// A thread's partial over kN more (capped) logits: its max first, so one exp an element.
// The sum of the logits only where label smoothing needs it (sum_x; else sx stays 0): the
// row kernels issue close to one instruction a cycle, so each one an element counts.
template <int kN>
__device__ __forceinline__ void accumulate(Partial &a, const float (&v)[kN], bool sum_x,
                                           float x0) {
  float lm = v[0];
#pragma unroll
  for (int j = 1; j < kN; ++j) lm = fmaxf(lm, v[j]);
  if (lm > a.m) {
    a.s = a.m == -INFINITY ? 0.f : a.s * exp2f((a.m - lm) * kLog2e);
    a.m = lm;
  }
#pragma unroll
  for (int j = 0; j < kN; ++j) a.s += exp2f((v[j] - a.m) * kLog2e);
  if (sum_x) {
#pragma unroll
    for (int j = 0; j < kN; ++j) a.sx += v[j] - x0;
  }
}

// What the gradient pass of a row needs, from the row's merged statistics.
struct RowGrad {
  float m, ls;  // lse = m + ls, kept apart: (x - m) - ls is exact near the max
  float zl;     // 2 z lse (the z-loss), never 1 + 2 z lse: see grad_of
  // the target's p (1 + 2 z lse) - eps / V - (1 - eps), computed once a row in double: in
  // fp32 p - u cancels (near p = 1, or with eps 0.992 and equal logits 60x, which kept p's
  // 1.3 ulp: cases/cross_entropy/findings.toml)
  float target;
  float smooth, coef;
  // folded for the uncapped gradient, two FMAs an element: ls log2(e), coef (1 + 2 z lse),
  // coef eps/V
  float ls2, cpz, csmooth;
};

// The row's loss (fp32; NaN for a target outside [0, V)) and its gradient terms. xy: the
// target's (capped) logit; x0: the first one, as `accumulate` took it. The mean's
// coefficient reads the non-ignored count, which a kernel before this one writes: callers
// launched as its dependents wait first.
__device__ __forceinline__ RowGrad row_grad(const CrossEntropyParams &p, int64_t row,
                                            const Partial &a, float xy, float x0,
                                            bool in_range, float *loss) {
  // the log once a row, in double (not __logf)
  const double lsd = log(double(a.s));
  const float ls = float(lsd);
  const float lse = a.m + ls;
  const float eps = p.label_smoothing, z = p.z_loss;
  const float V = float(p.vocab);
  *loss = in_range ? (1.f - eps) * ((a.m - xy) + ls) +
                         eps * (((a.m - x0) - __fdiv_rn(a.sx, V)) + ls) + z * lse * lse
                   : NAN;
  float coef;
  if (p.reduction == CeReduction::kNone) coef = p.grad_loss[row];
  else if (p.reduction == CeReduction::kSum) coef = *p.grad_loss;
  else coef = __fdiv_rn(*p.grad_loss, float(max(*p.count, 1)));  // IEEE, not fast-math's
  const float zl = 2.f * z * lse, smooth = __fdiv_rn(eps, V);
  // p - u first, then w: with eps >= 1/2, u = 1 - eps and w = -eps / V; below, u = 1 and
  // w = eps - eps / V, so that near p = 1 the 1 cancels exactly
  const double py = exp((double(xy) - double(a.m)) - lsd), smooth_d = double(eps) / p.vocab;
  const bool big_eps = eps >= 0.5f;
  const double u = big_eps ? 1.0 - eps : 1.0, w = big_eps ? -smooth_d : eps - smooth_d;
  const float target = float(fma(py, double(zl), (py - u) + w));
  return {a.m, ls, zl, target, smooth, coef, ls * kLog2e, coef * (1.f + zl), coef * smooth};
}

// dl/dx_j = coef (p_j (1 + 2 z lse) - eps / V - (1 - eps) [j == y]), times 1 - tanh^2
// with the softcap, for kN logits from column c0. raw: as stored (before the cap). The
// target's column takes RowGrad's target: 1 + 2 z lse or a rounded 1 - eps would leave that
// rounding (6e-8) in a gradient of 2 z lse (V = 1: all of it).
template <int kN, bool kCap>
__device__ __forceinline__ void grad_of(const RowGrad &r, const float (&raw)[kN], int64_t c0,
                                        int64_t y, float cap, float (&g)[kN]) {
  if constexpr (!kCap) {
    // coef (p (1 + 2 z lse) - eps / V) as one FMA on p; the target's column (one a row, compared
    // once a vector) from RowGrad's target, where p - 1 may cancel
#pragma unroll
    for (int j = 0; j < kN; ++j)
      g[j] = fmaf(exp2f(fmaf(raw[j] - r.m, kLog2e, -r.ls2)), r.cpz, -r.csmooth);
    const uint64_t k = uint64_t(y - c0);
    if (k < uint64_t(kN)) {
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        if (uint64_t(j) != k) continue;
        g[j] = r.coef * r.target;
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const double t = tanh_of(raw[j], cap);
      const float v = float(double(cap) * t), dcap = float(1.0 - t * t);
      const float pj = exp2f(((v - r.m) - r.ls) * kLog2e);
      const float d = c0 + j == y ? r.target : fmaf(pj, r.zl, pj) - r.smooth;
      g[j] = r.coef * (d * dcap);
    }
  }
}

}  // namespace ce
