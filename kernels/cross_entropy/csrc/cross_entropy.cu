// Cross entropy forward and backward together, one block per row of logits:
//   pass 1 reads the row once for an online max and sum of exp (and the sum of the
//   logits, for label smoothing), pass 2 reads it again, in reverse so that the part read
//   last (still in L2) comes first, and writes dlogits. fp32 arithmetic, one rounding at
//   the store. The non-ignored count (for a mean) is counted on the device by a kernel
//   before, and the loss summed in a fixed order by one after: no atomics, no host sync,
//   the same bits every call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/static_switch.h"
#include "cross_entropy.h"

namespace {

constexpr int kMaxThreads = 1024;
constexpr float kLog2e = 1.4426950408889634f;

// The target row `row` is scored against (the shift: the next position's label within
// its sequence, ignore_index at a sequence's last position).
__device__ __forceinline__ int64_t target_of(const CrossEntropyParams &p, int64_t row) {
  if (!p.shift) return p.targets[row];
  if ((row + 1) % p.seq_len == 0) return p.ignore_index;
  return p.targets[row + 1];
}

// The sum of every thread's v over one block, in a fixed order (a butterfly per warp, the
// warps' partials in order), valid in thread 0.
template <typename T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T part[kMaxThreads / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  T total = T(0);
  if (threadIdx.x == 0)
    for (int w = 0; w < int(blockDim.x >> 5); ++w) total += part[w];
  return total;
}

// Non-ignored targets, counted by one block (an integer sum).
__global__ void __launch_bounds__(kMaxThreads) ce_count_kernel(CrossEntropyParams p) {
  int c = 0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) c += target_of(p, i) != p.ignore_index;
  const int total = block_sum(c);
  if (threadIdx.x == 0) *p.count = total;
}

// (max, sum of exp(x - max)) pairs merged; commutative, so a butterfly leaves the same
// bits in every lane.
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;  // both empty
  s = s * exp2f((m - mm) * kLog2e) + s2 * exp2f((m2 - mm) * kLog2e);
  m = mm;
}

// c tanh(x / c) in double: under --use_fast_math tanhf is the hardware approximation
// (about 11 bits), and the softcap's logits feed every exp of the row
__device__ __forceinline__ double tanh_of(float x, float cap) {
  return tanh(double(x) / double(cap));
}
__device__ __forceinline__ float capped(float x, float cap) {
  return float(double(cap) * tanh_of(x, cap));
}

template <typename T, int kN, bool kCap>
__device__ __forceinline__ void load(const T *src, float cap, float (&v)[kN]) {
  if constexpr (kN == 1) {
    v[0] = to_f(src[0]);
  } else {
    // kN elements in one 16-byte access
    const uint4 raw = *reinterpret_cast<const uint4 *>(src);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int j = 0; j < kN; ++j) v[j] = to_f(e[j]);
  }
  if constexpr (kCap) {
#pragma unroll
    for (int j = 0; j < kN; ++j) v[j] = capped(v[j], cap);
  }
}

template <typename T, int kN>
__device__ __forceinline__ void store(T *dst, const float (&g)[kN]) {
  if constexpr (kN == 1) {
    dst[0] = from_f<T>(g[0]);
  } else {
    uint4 raw;
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int j = 0; j < kN; ++j) e[j] = from_f<T>(g[j]);
    *reinterpret_cast<uint4 *>(dst) = raw;
  }
}

// One block per row. kN: elements per access (16 bytes, or 1 where rows are not 16-byte
// aligned or V is not a multiple); kCap: softcap on.
template <typename T, int kN, bool kCap>
__global__ void __launch_bounds__(kMaxThreads) ce_row_kernel(CrossEntropyParams p) {
  __shared__ float sm_m[kMaxThreads / 32], sm_s[kMaxThreads / 32], sm_x[kMaxThreads / 32];
  __shared__ float sm_xy;
  const int64_t row = blockIdx.x;
  const int V = p.vocab;
  const T *x = static_cast<const T *>(p.logits) + row * p.logits_row;
  T *dx = static_cast<T *>(p.dlogits) + row * p.dlogits_row;
  const int64_t y = target_of(p, row);
  const int vectors = V / kN;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float *row_out = p.reduction == CeReduction::kNone ? p.loss : p.row_loss;

  if (y == p.ignore_index) {  // no loss, a zero gradient row
    float z[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) z[j] = 0.f;
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) store<T, kN>(dx + i * kN, z);
    if (threadIdx.x == 0) row_out[row] = 0.f;
    return;
  }
  const bool in_range = y >= 0 && y < V;
  if (threadIdx.x == 0) {
    float v[1] = {NAN};
    if (in_range) load<T, 1, kCap>(x + y, p.softcap, v);
    sm_xy = v[0];
  }

  // pass 1: online max and sum of exp, and the sum of the (capped) logits
  float m = -INFINITY, s = 0.f, sx = 0.f;
  for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
    float v[kN];
    load<T, kN, kCap>(x + i * kN, p.softcap, v);
    float lm = v[0];
#pragma unroll
    for (int j = 1; j < kN; ++j) lm = fmaxf(lm, v[j]);
    if (lm > m) {
      s = m == -INFINITY ? 0.f : s * exp2f((m - lm) * kLog2e);
      m = lm;
    }
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      s += exp2f((v[j] - m) * kLog2e);
      sx += v[j];
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    sx += __shfl_xor_sync(0xffffffffu, sx, off);
  }
  if (lane == 0) {
    sm_m[warp] = m;
    sm_s[warp] = s;
    sm_x[warp] = sx;
  }
  __syncthreads();
  // every thread merges the warps' partials in the same order: the same bits everywhere
  m = sm_m[0];
  s = sm_s[0];
  sx = sm_x[0];
  for (int w = 1; w < warps; ++w) {
    merge(m, s, sm_m[w], sm_s[w]);
    sx += sm_x[w];
  }
  // lse = m + ls, kept apart: rounded to fp32 at |lse| ~ 200 it is 1.5e-5 off, and every
  // p = exp(x - lse) with it; (x - m) - ls is exact near the max. The log once a row, in
  // double (not __logf)
  const float ls = float(log(double(s)));
  const float lse = m + ls;
  const float eps = p.label_smoothing, z = p.z_loss;
  const float xy = sm_xy;
  const float loss = (1.f - eps) * ((m - xy) + ls) + eps * ((m - __fdiv_rn(sx, float(V))) + ls) +
                     z * lse * lse;

  float coef;
  if (p.reduction == CeReduction::kNone) {
    coef = p.grad_loss[row];
  } else if (p.reduction == CeReduction::kSum) {
    coef = *p.grad_loss;
  } else {
    coef = __fdiv_rn(*p.grad_loss, float(max(*p.count, 1)));  // IEEE, not fast-math's
  }
  if (threadIdx.x == 0) row_out[row] = in_range ? loss : NAN;

  // pass 2, last vectors first: dl/dx_j = coef (p_j (1 + 2 z lse) - eps / V - (1 - eps) [j == y]),
  // times 1 - tanh^2 with the softcap
  const float pz = 1.f + 2.f * z * lse, smooth = __fdiv_rn(eps, float(V)), hit = 1.f - eps;
  const int first = vectors - 1 - int(threadIdx.x);
  for (int i = first; i >= 0; i -= blockDim.x) {
    float v[kN], g[kN];
    if constexpr (kCap) {
      float raw[kN];
      load<T, kN, false>(x + i * kN, 0.f, raw);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const double t = tanh_of(raw[j], p.softcap);
        v[j] = float(double(p.softcap) * t);
        g[j] = float(1.0 - t * t);
      }
    } else {
      load<T, kN, false>(x + i * kN, 0.f, v);
    }
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      float d = exp2f(((v[j] - m) - ls) * kLog2e) * pz - smooth;
      if (int64_t(i) * kN + j == y) d -= hit;
      if constexpr (kCap) d *= g[j];
      g[j] = coef * d;
    }
    store<T, kN>(dx + i * kN, g);
  }
}

// The loss of a mean or sum: the per-token losses summed by one block in a fixed order,
// in double, divided by the non-ignored count for a mean.
__global__ void __launch_bounds__(kMaxThreads) ce_loss_kernel(CrossEntropyParams p) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) acc += double(p.row_loss[i]);
  double total = block_sum(acc);
  if (threadIdx.x == 0) {
    if (p.reduction == CeReduction::kMean) total /= double(max(*p.count, 1));
    *p.loss = float(total);
  }
}

// Threads per row block: about four accesses a thread, 32 to 1024.
int row_threads(int vectors) {
  int t = 32;
  while (t < kMaxThreads && t * 4 < vectors) t *= 2;
  return t;
}

template <typename T>
cudaError_t launch_rows(const CrossEntropyParams &p, bool vectorized, cudaStream_t stream) {
  constexpr int kVec = 16 / int(sizeof(T));
  const int n = vectorized ? kVec : 1;
  const dim3 grid(unsigned(p.rows)), block(unsigned(row_threads(p.vocab / n)));
  return BOOL_SWITCH(vectorized, kV, [&] {
    return BOOL_SWITCH(p.softcap > 0.f, kCap, [&] {
      ce_row_kernel<T, kV ? kVec : 1, kCap><<<grid, block, 0, stream>>>(p);
      return cudaGetLastError();
    });
  });
}

}  // namespace

cudaError_t cross_entropy_launch(const CrossEntropyParams &p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.reduction == CeReduction::kMean) {
    ce_count_kernel<<<1, kMaxThreads, 0, stream>>>(p);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  const int es = elem_size(p.dtype);
  const int vec = 16 / es;
  const bool vectorized = p.vocab % vec == 0 && (p.logits_row * es) % 16 == 0 &&
                          (p.dlogits_row * es) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(p.logits) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(p.dlogits) % 16 == 0;
  const cudaError_t err = DTYPE_SWITCH(p.dtype, T, [&] {
    return launch_rows<T>(p, vectorized, stream);
  });
  if (err != cudaSuccess || p.reduction == CeReduction::kNone) return err;
  ce_loss_kernel<<<1, kMaxThreads, 0, stream>>>(p);
  return cudaGetLastError();
}
