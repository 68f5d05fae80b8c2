// AdamW over a whole parameter list in one launch (PyTorch's semantics: decoupled weight
// decay, bias correction, amsgrad, maximize), with GradScaler's unscale and skip and
// clip_grad_norm_'s global-norm clipping fused in.
//
// A persistent cooperative grid walks the list's chunks (adamw.h) twice around one grid
// barrier (once, with no barrier, for a plain step without a GradScaler or clipping).
// Pass 1 reads every gradient: any inf or NaN, and with clipping the sum of
// squares, per block in a fixed order. Every block then reduces the per-block results in
// the same fixed order (so all blocks agree on the skip and on the clip coefficient,
// bitwise, run after run), and pass 2 updates each element for `steps` steps in fp32
// registers, reading gradient, moments and parameter (or master) once and writing them
// once. Pass 2 walks each block's chunks in reverse, so it starts on the gradients pass 1
// read last, which may still be in the L2. The skip needs pass 1 to finish everywhere
// before any parameter moves: that, not the launch count, costs the second gradient read.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/reduce.cuh"
#include "adamw.h"
#include "adamw_launchers.h"

namespace {

struct Vec4 {
  float x[4];
};

template <typename T> __device__ __forceinline__ Vec4 load4(const T *p);
template <> __device__ __forceinline__ Vec4 load4<float>(const float *p) {
  const float4 v = *reinterpret_cast<const float4 *>(p);
  return {{v.x, v.y, v.z, v.w}};
}
template <typename T> __device__ __forceinline__ Vec4 load4_16(const T *p) {
  const uint2 raw = *reinterpret_cast<const uint2 *>(p);
  const T *h = reinterpret_cast<const T *>(&raw);
  return {{to_f(h[0]), to_f(h[1]), to_f(h[2]), to_f(h[3])}};
}
template <> __device__ __forceinline__ Vec4 load4<__half>(const __half *p) { return load4_16(p); }
template <> __device__ __forceinline__ Vec4 load4<__nv_bfloat16>(const __nv_bfloat16 *p) {
  return load4_16(p);
}

template <typename T> __device__ __forceinline__ void store4(T *p, const Vec4 &v);
template <> __device__ __forceinline__ void store4<float>(float *p, const Vec4 &v) {
  *reinterpret_cast<float4 *>(p) = make_float4(v.x[0], v.x[1], v.x[2], v.x[3]);
}
template <typename T> __device__ __forceinline__ void store4_16(T *p, const Vec4 &v) {
  uint2 raw;
  T *h = reinterpret_cast<T *>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = from_f<T>(v.x[k]);
  *reinterpret_cast<uint2 *>(p) = raw;
}
template <> __device__ __forceinline__ void store4<__half>(__half *p, const Vec4 &v) {
  store4_16(p, v);
}
template <> __device__ __forceinline__ void store4<__nv_bfloat16>(__nv_bfloat16 *p,
                                                                  const Vec4 &v) {
  store4_16(p, v);
}

// By the exponent bits: --use_fast_math lets the compiler assume no inf or NaN otherwise.
__device__ __forceinline__ bool nonfinite(float x) {
  return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
}

// The tensor holding chunk c (binary search over chunk_begin).
__device__ __forceinline__ const AdamwTensor &tensor_of(const AdamwParams &p, int64_t c) {
  int lo = 0, hi = p.n_tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (p.tensors[mid].chunk_begin <= c) lo = mid; else hi = mid - 1;
  }
  return p.tensors[lo];
}

// Calls f(i, n) for the elements [begin, end) of one chunk, i the first of n (4, or 1 at
// an unaligned tensor or the tail), each thread of the block its own elements.
template <typename F>
__device__ __forceinline__ void for_chunk(const AdamwTensor &t, int64_t begin, int64_t end,
                                          F &&f) {
  int64_t i = begin + 4 * int64_t(threadIdx.x);
  if (t.aligned) {
    for (; i + 4 <= end; i += 4 * kThreads) f(i, 4);
    // the tail: fewer than 4 elements past the last full vector, at most one thread
    const int64_t tail = begin + ((end - begin) & ~int64_t(3));
    if (threadIdx.x == 0)
      for (int64_t j = tail; j < end; ++j) f(j, 1);
  } else {
    for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) f(j, 1);
  }
}

// Pass 1 over one chunk of gradients: whether any unscaled value is inf or NaN, and the
// sum of their squares (each thread in the order of for_chunk). Aligned chunks keep 64
// bytes a thread in flight: one vector at a time left the read of 16-bit gradients at
// about half the bandwidth.
template <typename G>
__device__ __forceinline__ void scan_chunk(const AdamwTensor &t, const G *g, int64_t begin,
                                           int64_t end, float inv_scale, bool &bad,
                                           float &sq) {
  auto add = [&](float x) {
    x *= inv_scale;
    bad |= nonfinite(x);
    sq = fmaf(x, x, sq);
  };
  if (!t.aligned) {
    for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) add(to_f(g[j]));
    return;
  }
  constexpr int kUnroll = sizeof(G) == 4 ? 4 : 8;
  constexpr int64_t kStride = 4 * kThreads;
  int64_t i = begin + 4 * int64_t(threadIdx.x);
  for (; i + (kUnroll - 1) * kStride + 4 <= end; i += kUnroll * kStride) {
    Vec4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load4(g + i + u * kStride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int k = 0; k < 4; ++k) add(v[u].x[k]);
  }
  for (; i + 4 <= end; i += kStride) {
    const Vec4 v = load4(g + i);
#pragma unroll
    for (int k = 0; k < 4; ++k) add(v.x[k]);
  }
  const int64_t tail = begin + ((end - begin) & ~int64_t(3));
  if (threadIdx.x == 0)
    for (int64_t j = tail; j < end; ++j) add(to_f(g[j]));
}

// Every block of the (co-resident, cooperative) grid waits here for all the others. The
// last to arrive resets the count and advances the generation, leaving both as found.
__device__ void grid_barrier(unsigned *bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned *gen = bar + 1;
    const unsigned seen = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == seen) __nanosleep(64);
    }
    __threadfence();
  }
  __syncthreads();
}

template <typename P, typename G, bool kMaster, bool kAms>
__global__ void __launch_bounds__(kThreads) adamw_kernel(const AdamwParams p) {
  __shared__ float s_step_size[kAdamwMaxSteps], s_bc2_sqrt[kAdamwMaxSteps];
  __shared__ float s_coef;
  __shared__ int s_found;

  // ---- pass 1: the skip and the norm (a plain unclipped step has neither: one read)
  if (p.scaler || p.clip) {
    // across chunks in double: a thread sums thousands of squares on a large list, and
    // an fp32 sum's error (1e-5 of the norm on GPT-2 large) moved the clip coefficient
    // past the bound
    double sumsq = 0.0;
    bool bad = false;
    for (int64_t c = blockIdx.x; c < p.n_chunks; c += gridDim.x) {
      const AdamwTensor &t = tensor_of(p, c);
      const int64_t begin = (c - t.chunk_begin) * kAdamwChunk;
      const int64_t end = min(begin + kAdamwChunk, t.numel);
      const G *g = static_cast<const G *>(t.grad);
      float sq = 0.f;  // a chunk's squares (16 vectors a thread) in fp32, the rest in double
      scan_chunk(t, g, begin, end, p.inv_scale, bad, sq);
      sumsq += double(sq);
    }
    const int block_bad = __syncthreads_or(bad && p.scaler);
    const double block_sq = p.clip ? rowsum::block_sum_tree<kThreads / 32>(sumsq) : 0.0;
    if (threadIdx.x == 0) {
      p.partial_found[blockIdx.x] = block_bad;
      p.partial_sumsq[blockIdx.x] = block_sq;
    }
    grid_barrier(p.barrier);

    // every block reduces the same values in the same order: the same verdict and norm
    bool any = false;
    double sq = 0.0;
    for (int b = threadIdx.x; b < gridDim.x; b += kThreads) {
      any |= __ldcg(p.partial_found + b) != 0;
      sq += __ldcg(p.partial_sumsq + b);
    }
    const int found = __syncthreads_or(any);
    const double total = p.clip ? rowsum::block_sum_tree<kThreads / 32>(sq) : 0.0;
    if (threadIdx.x == 0) {
      s_found = found;
      double coef = 1.0;
      if (p.clip) coef = fmin(1.0, p.max_norm / (sqrt(total) + 1e-6));
      s_coef = float(coef);
    }
  } else if (threadIdx.x == 0) {
    s_found = 0;
    s_coef = 1.f;
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) *p.found_inf = s_found ? 1.f : 0.f;
  if (threadIdx.x < p.steps) {
    const double t = double(p.step + threadIdx.x);
    s_step_size[threadIdx.x] = float(double(p.lr) / (1.0 - pow(p.beta1_d, t)));
    s_bc2_sqrt[threadIdx.x] = float(sqrt(1.0 - pow(p.beta2_d, t)));
  }
  __syncthreads();
  if (s_found) return;  // GradScaler's skip: nothing moves
  const float gmul = p.inv_scale * s_coef * (p.maximize ? -1.f : 1.f);
  const float decay = p.decay;
  const float b1 = p.beta1, b2 = p.beta2, omb1 = p.one_minus_beta1, omb2 = p.one_minus_beta2;

  // ---- pass 2: the update, this block's chunks in reverse
  const int64_t mine = p.n_chunks > blockIdx.x ? (p.n_chunks - 1 - blockIdx.x) / gridDim.x : -1;
  for (int64_t c = blockIdx.x + mine * int64_t(gridDim.x); c >= int64_t(blockIdx.x) && mine >= 0;
       c -= gridDim.x) {
    const AdamwTensor &t = tensor_of(p, c);
    const int64_t begin = (c - t.chunk_begin) * kAdamwChunk;
    const int64_t end = min(begin + kAdamwChunk, t.numel);
    const G *gp = static_cast<const G *>(t.grad);
    P *pp = static_cast<P *>(t.param);
    for_chunk(t, begin, end, [&](int64_t i, int n) {
      Vec4 g, w, m, v, vm;
      if (n == 4) {
        g = load4(gp + i);
        w = kMaster ? load4(t.master + i) : load4(pp + i);
        m = load4(t.exp_avg + i);
        v = load4(t.exp_avg_sq + i);
        if (kAms) vm = load4(t.max_exp_avg_sq + i);
      } else {
        g.x[0] = to_f(gp[i]);
        w.x[0] = kMaster ? t.master[i] : to_f(pp[i]);
        m.x[0] = t.exp_avg[i];
        v.x[0] = t.exp_avg_sq[i];
        if (kAms) vm.x[0] = t.max_exp_avg_sq[i];
      }
      for (int k = 0; k < n; ++k) {
        const float gk = g.x[k] * gmul;
        float wk = w.x[k], mk = m.x[k], vk = v.x[k], vmk = kAms ? vm.x[k] : 0.f;
        for (int s = 0; s < p.steps; ++s) {
          wk *= decay;
          mk = fmaf(b1, mk, omb1 * gk);
          vk = fmaf(b2, vk, omb2 * gk * gk);
          float den = vk;
          if (kAms) {
            vmk = fmaxf(vmk, vk);
            den = vmk;
          }
          wk -= s_step_size[s] * mk / (sqrtf(den) / s_bc2_sqrt[s] + p.eps);
        }
        w.x[k] = wk; m.x[k] = mk; v.x[k] = vk; vm.x[k] = vmk;
      }
      if (n == 4) {
        if (kMaster) store4(t.master + i, w);
        store4(pp + i, w);
        store4(t.exp_avg + i, m);
        store4(t.exp_avg_sq + i, v);
        if (kAms) store4(t.max_exp_avg_sq + i, vm);
      } else {
        if (kMaster) t.master[i] = w.x[0];
        pp[i] = from_f<P>(w.x[0]);
        t.exp_avg[i] = m.x[0];
        t.exp_avg_sq[i] = v.x[0];
        if (kAms) t.max_exp_avg_sq[i] = vm.x[0];
      }
    });
  }
}

}  // namespace

template <typename P, typename G, bool kMaster, bool kAms>
cudaError_t adamw_job::max_grid(int *grid) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess)
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<const void *>(&adamw_kernel<P, G, kMaster, kAms>), kThreads, 0);
  *grid = sms * per_sm;
  return err;
}

template <typename P, typename G, bool kMaster, bool kAms>
cudaError_t adamw_job::step(const AdamwParams &p, const AdamwPlan &plan, cudaStream_t stream) {
  AdamwParams args = p;
  void *argv[] = {&args};
  return cudaLaunchCooperativeKernel(
      reinterpret_cast<const void *>(&adamw_kernel<P, G, kMaster, kAms>), plan.grid, plan.block,
      argv, 0, stream);
}

template cudaError_t adamw_job::step<float, float, false, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<float, float, false, false>(int *);
template cudaError_t adamw_job::step<float, float, false, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<float, float, false, true>(int *);
template cudaError_t adamw_job::step<float, float, true, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<float, float, true, false>(int *);
template cudaError_t adamw_job::step<float, float, true, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<float, float, true, true>(int *);
template cudaError_t adamw_job::step<__half, float, false, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, float, false, false>(int *);
template cudaError_t adamw_job::step<__half, float, false, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, float, false, true>(int *);
template cudaError_t adamw_job::step<__half, float, true, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, float, true, false>(int *);
template cudaError_t adamw_job::step<__half, float, true, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, float, true, true>(int *);
template cudaError_t adamw_job::step<__half, __half, false, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, __half, false, false>(int *);
template cudaError_t adamw_job::step<__half, __half, false, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, __half, false, true>(int *);
template cudaError_t adamw_job::step<__half, __half, true, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, __half, true, false>(int *);
template cudaError_t adamw_job::step<__half, __half, true, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__half, __half, true, true>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, float, false, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, float, false, false>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, float, false, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, float, false, true>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, float, true, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, float, true, false>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, float, true, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, float, true, true>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, __nv_bfloat16, false, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, __nv_bfloat16, false, false>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, __nv_bfloat16, false, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, __nv_bfloat16, false, true>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, __nv_bfloat16, true, false>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, __nv_bfloat16, true, false>(int *);
template cudaError_t adamw_job::step<__nv_bfloat16, __nv_bfloat16, true, true>(const AdamwParams &, const AdamwPlan &, cudaStream_t);
template cudaError_t adamw_job::max_grid<__nv_bfloat16, __nv_bfloat16, true, true>(int *);
