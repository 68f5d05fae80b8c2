// Causal conv1d backward, x channel-contiguous (channel-last): a thread owns 4 consecutive
// channels and scans a segment of time; a warp reads 4 x 32 consecutive channels per step
// (coalesced); the K-1 halo steps before a segment come from the cache. Vectorized
// problems stream chunks of 8 (16-bit) or 4 (fp32) steps through a per-warp cp.async ring
// and index each chunk's window at compile time (conv1d_bwd_scan_ring; seq_idx ids a chunk
// ahead, broadcast by shuffles); the others load 4 steps ahead into registers and shift a
// window of the last K steps (conv1d_bwd_scan). Each block writes its segments'
// dweight/dbias partial sums to a workspace row (conv1d_bwd_reduce.cu adds them).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../../common/csrc/row_pipeline.cuh"
#include "../../common/csrc/static_switch.h"
#include "conv1d_bwd_kernels.cuh"
#include "conv1d_bwd_launchers.h"

namespace {

constexpr int kPrefetch = 4;  // conv1d_bwd_scan: time steps loaded ahead of their use

// The taps the kernels sum over a K-step window, masked with seq_idx: a step
// counts only if it is in the sequence of the step the sum is for (in(k); always without
// seq_idx). tap_sum: init + sum_k w[k] v(k) (a pre-activation over x, a dx over g');
// add_tap_terms: dw[k] += g v(k) (the dweight terms of one output over x). (The
// channel-first scan_tile writes these loops out: through the helpers its machine code
// changed.)
template <int K, bool kSeq, typename V, typename In>
__device__ __forceinline__ float tap_sum(float init, const float (&w)[K], V v, In in) {
  float acc = init;
#pragma unroll
  for (int k = 0; k < K; ++k) acc += (!kSeq || in(k) ? w[k] * v(k) : 0.f);
  return acc;
}
template <int K, bool kSeq, typename V, typename In>
__device__ __forceinline__ void add_tap_terms(float (&dw)[K], float g, V v, In in) {
#pragma unroll
  for (int k = 0; k < K; ++k) dw[k] += (!kSeq || in(k) ? g * v(k) : 0.f);
}

template <typename T, bool kVec>
__device__ __forceinline__ void load_c(const T *base, int64_t stride_d, int c0, int dim,
                                       float (&out)[kChannelsPerThread]) {
  if (kVec && c0 + kChannelsPerThread <= dim) {
    load_vec<T, kChannelsPerThread>(base + c0, out);
  } else {
#pragma unroll
    for (int i = 0; i < kChannelsPerThread; ++i)
      out[i] = c0 + i < dim ? to_f<T>(base[int64_t(c0 + i) * stride_d]) : 0.f;
  }
}

// The weights and bias of a lane's channels (clamped to the last channel past dim).
template <int K>
__device__ __forceinline__ void load_lane_weights(const ConvBwdParams &p, int c0,
                                                  float (&w)[kChannelsPerThread][K],
                                                  float (&bias)[kChannelsPerThread]) {
#pragma unroll
  for (int i = 0; i < kChannelsPerThread; ++i) load_weights<K>(p, min(c0 + i, p.dim - 1), w[i], bias[i]);
}

template <int K> using SegmentSums = float[kSegments][kLanesC][kChannelsPerThread][K + 1];

// The block's dweight/dbias partials, summed over its time segments (warps) in a fixed
// order into the workspace row of (batch, block y). Every thread of the block calls it.
template <int K>
__device__ __forceinline__ void finish_segments(const ConvBwdParams &p, int b, int c0,
                                                const float (&dw)[kChannelsPerThread][K],
                                                const float (&db)[kChannelsPerThread],
                                                SegmentSums<K> &red) {
  const int lane = threadIdx.x % kLanesC, seg = threadIdx.x / kLanesC;
#pragma unroll
  for (int i = 0; i < kChannelsPerThread; ++i) {
#pragma unroll
    for (int k = 0; k < K; ++k) red[seg][lane][i][k] = dw[i][k];
    red[seg][lane][i][K] = db[i];
  }
  __syncthreads();
  if (seg == 0) {
    const int64_t part = int64_t(b) * gridDim.y + blockIdx.y;
#pragma unroll
    for (int i = 0; i < kChannelsPerThread; ++i) {
      if (c0 + i >= p.dim) continue;
#pragma unroll
      for (int k = 0; k <= K; ++k) {
        float s = 0.f;
#pragma unroll
        for (int sg = 0; sg < kSegments; ++sg) s += red[sg][lane][i][k];
        p.ws[(part * p.dim + c0 + i) * (K + 1) + k] = s;
      }
    }
  }
}

// A thread owns 4 consecutive channels and scans one time segment, keeping the last K
// inputs and gradients in registers. Steps are loaded kPrefetch at a time so that several
// loads are in flight before the first is used.
template <typename T, int K, bool kVec, bool kSeq>
__global__ void __launch_bounds__(kLanesC * kSegments, 3)
conv1d_bwd_scan(const ConvBwdParams p, const int seg_len) {
  constexpr int H = K - 1;
  constexpr int VC = kChannelsPerThread;
  const int L = p.seqlen;
  const int lane = threadIdx.x % kLanesC, seg = threadIdx.x / kLanesC;
  const int b = blockIdx.z;
  const int c0 = (blockIdx.x * kLanesC + lane) * VC;
  const int64_t t0_64 = (int64_t(blockIdx.y) * kSegments + seg) * seg_len;
  const int t0 = t0_64 < L ? int(t0_64) : L;
  const int t1 = min(t0 + seg_len, L);

  const T *x = static_cast<const T *>(p.x) + b * p.x_b;
  const T *dout = static_cast<const T *>(p.dout) + b * p.dout_b;
  T *dx = static_cast<T *>(p.dx) + b * p.dx_b;

  float w[VC][K], bias[VC];
  load_lane_weights<K>(p, c0, w, bias);

  // windows over the last K steps: index H is the newest (time t)
  float xw[VC][K] = {}, gw[VC][K] = {};
  int idw[K] = {};
  float dw[VC][K] = {}, db[VC] = {};

  const int t_end = t1 + H;  // the last H steps finish dx of the segment's tail
  for (int tb = t0 - H; tb < t_end; tb += kPrefetch) {
    float xs[kPrefetch][VC], gs[kPrefetch][VC];
    int ids[kPrefetch];
#pragma unroll
    for (int u = 0; u < kPrefetch; ++u) {
      const int t = tb + u;
      if (t >= 0 && t < L) {
        load_c<T, kVec>(x + t * p.x_t, p.x_d, c0, p.dim, xs[u]);
      } else {
#pragma unroll
        for (int i = 0; i < VC; ++i)
          xs[u][i] = (t < t_end && c0 + i < p.dim) ? x_at<T>(p, b, c0 + i, t) : 0.f;
      }
      if (t >= t0 && t < L) {
        load_c<T, kVec>(dout + t * p.dout_t, p.dout_d, c0, p.dim, gs[u]);
      } else {
#pragma unroll
        for (int i = 0; i < VC; ++i) gs[u][i] = 0.f;
      }
      ids[u] = kSeq ? id_at(p, b, t) : 0;
    }

#pragma unroll
    for (int u = 0; u < kPrefetch; ++u) {
      const int t = tb + u;
      if (t >= t_end) break;
      const int id = ids[u];
#pragma unroll
      for (int m = 0; m < H; ++m) {
        idw[m] = idw[m + 1];
#pragma unroll
        for (int i = 0; i < VC; ++i) xw[i][m] = xw[i][m + 1];
      }
      idw[H] = id;
#pragma unroll
      for (int i = 0; i < VC; ++i) xw[i][H] = xs[u][i];
      if (t < t0) continue;  // priming the input window

      float gv[VC];
#pragma unroll
      for (int i = 0; i < VC; ++i) {
        float g = gs[u][i];
        if (kSeq && id < 0) {
          g = 0.f;
        } else if (p.silu && t < L) {
          const float pre = tap_sum<K, kSeq>(bias[i], w[i], [&](int k) { return xw[i][k]; },
                                             [&](int k) { return idw[k] == id; });
          g = silu_grad(g, pre);
        }
        gv[i] = g;
      }
      if (t < t1) {  // this segment owns output t's dweight/dbias contribution
#pragma unroll
        for (int i = 0; i < VC; ++i) {
          db[i] += gv[i];
          add_tap_terms<K, kSeq>(dw[i], gv[i], [&](int k) { return xw[i][k]; },
                                 [&](int k) { return idw[k] == id; });
        }
      }
#pragma unroll
      for (int m = 0; m < H; ++m)
#pragma unroll
        for (int i = 0; i < VC; ++i) gw[i][m] = gw[i][m + 1];
#pragma unroll
      for (int i = 0; i < VC; ++i) gw[i][H] = gv[i];

      const int tp = t - H;  // input step whose gradient is now complete
      if (tp >= t0 && tp < t1) {
        float dxv[VC];
#pragma unroll
        for (int i = 0; i < VC; ++i) {
          float acc = tap_sum<K, kSeq>(0.f, w[i], [&](int k) { return gw[i][H - k]; },
                                       [&](int k) { return idw[H - k] == idw[0]; });
          const int j = tp - (L - H);
          if (p.has_dfinal && j >= 0 && c0 + i < p.dim) acc += dfinal_at<T>(p, b, c0 + i, j);
          dxv[i] = acc;
        }
        if (kVec && c0 + VC <= p.dim) {
          store_vec<T, VC>(dx + tp * p.dx_t + c0, dxv);
        } else {
#pragma unroll
          for (int i = 0; i < VC; ++i)
            if (c0 + i < p.dim) dx[tp * p.dx_t + int64_t(c0 + i) * p.dx_d] = from_f<T>(dxv[i]);
        }
      }
    }
  }

  __shared__ SegmentSums<K> red;
  finish_segments<K>(p, b, c0, dw, db, red);
}

// Vectorized channel-last problems: conv1d_bwd_scan's scan in chunks of
// kChunk steps that stream through a per-warp shared-memory ring (cp.async), two chunks
// in flight while one is computed. A chunk's window is an array indexed at compile time
// (conv1d_bwd_scan shifts its registers every step: a fifth of its instructions were
// moves), and bounds, segment ownership and dfinal_states are checked only in a segment's
// first and last chunks.
template <typename T> struct ClStream {
  static constexpr int kVecBytes = kChannelsPerThread * sizeof(T);  // a lane's step: 8 or 16
  static constexpr int kChunk = 64 / kVecBytes;                     // steps a chunk: 8 or 4
  static constexpr int kStages = 3;
  static constexpr int kLaneBytes = 2 * kChunk * kVecBytes;        // x and dout of a chunk
};

// A lane's step slot (its 4 channels) as floats.
template <typename T>
__device__ __forceinline__ void read_slot(unsigned addr, float (&out)[kChannelsPerThread]) {
  if constexpr (sizeof(T) == 4) {
    const uint4 v = rowpipe::lds16(addr);
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  } else {
    union { uint2 u; T e[kChannelsPerThread]; } v;
    v.u = rowpipe::lds8(addr);
#pragma unroll
    for (int i = 0; i < kChannelsPerThread; ++i) out[i] = to_f<T>(v.e[i]);
  }
}

// kSeq: packed sequences. A warp loads the ids of the next chunk's steps (a lane a step)
// while it computes the current chunk, and broadcasts them by shuffles; the masks are
// conv1d_bwd_scan's. The ids window takes registers: 3 blocks an SM instead of 4.
template <typename T, int K, bool kSilu, bool kSeq>
__global__ void __launch_bounds__(kLanesC * kSegments, kSeq ? 3 : 4)
conv1d_bwd_scan_ring(const ConvBwdParams p, const int seg_len) {
  using S = ClStream<T>;
  constexpr int H = K - 1, VC = kChannelsPerThread, U = S::kChunk, VB = S::kVecBytes;
  static_assert(U >= H, "a segment's later chunks must emit only its own dx steps");
  // the ring until the scan ends, then the segments' sums
  __shared__ __align__(16) union {
    unsigned char ring[kSegments][S::kStages][kLanesC * S::kLaneBytes];
    SegmentSums<K> red;
  } sm;
  const int L = p.seqlen;
  const int lane = threadIdx.x % kLanesC, seg = threadIdx.x / kLanesC;
  const int b = blockIdx.z;
  const int c0 = (blockIdx.x * kLanesC + lane) * VC;
  const bool lane_in = c0 < p.dim;  // dim % VC == 0 on this path: all 4 channels or none
  const int64_t t0_64 = (int64_t(blockIdx.y) * kSegments + seg) * seg_len;
  const int t0 = t0_64 < L ? int(t0_64) : L;
  const int t1 = min(t0 + seg_len, L);
  const int nsteps = t1 > t0 ? t1 - t0 + H : 0;  // the last H finish dx of the tail
  const int nchunks = (nsteps + U - 1) / U;

  const T *x = static_cast<const T *>(p.x) + b * p.x_b + (lane_in ? c0 : 0);
  const T *dout = static_cast<const T *>(p.dout) + b * p.dout_b + (lane_in ? c0 : 0);
  T *dx = static_cast<T *>(p.dx) + b * p.dx_b + c0;
  float w[VC][K], bias[VC];
  load_lane_weights<K>(p, c0, w, bias);

  // slot of (stage, tensor: 0 x / 1 dout, step): a warp's 32 lanes side by side
  const unsigned ring0 = rowpipe::smem_addr(&sm.ring[seg][0][lane * VB]);
  auto slot = [&](int s, int q, int u) {
    return ring0 + unsigned(s * kLanesC * S::kLaneBytes + (q * U + u) * kLanesC * VB);
  };
  auto issue = [&](int j, int s) {  // chunk j's steps; past L (or dim) zero-filled
    if (j < nchunks) {
      const int tc = t0 + j * U;
      const T *xp = x + int64_t(tc) * p.x_t, *dp = dout + int64_t(tc) * p.dout_t;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool in = lane_in && tc + u < L;
        rowpipe::cp_async<VB>(slot(s, 0, u), in ? xp : x, in ? VB : 0);
        rowpipe::cp_async<VB>(slot(s, 1, u), in ? dp : dout, in ? VB : 0);
        xp += p.x_t;
        dp += p.dout_t;
      }
    }
    rowpipe::cp_async_commit();  // empty groups too: the waits count groups
  };

  // xa[m], ga[m], ia[m]: x, g' and sequence id at tc - H + m; [0, H) carried from the
  // previous chunk
  float xa[H + U][VC], ga[H + U][VC];
  int ia[H + U];
  // the ids of a chunk's steps, lane u holding step u's (the next chunk's, in flight)
  auto chunk_ids = [&](int j) {
    return kSeq && j < nchunks && lane < U ? id_at(p, b, t0 + j * U + lane) : 0;
  };
  int ids = chunk_ids(0);
#pragma unroll
  for (int h = 0; h < H; ++h) {
    ia[h] = kSeq ? id_at(p, b, t0 - H + h) : 0;
#pragma unroll
    for (int i = 0; i < VC; ++i) {
      xa[h][i] = lane_in ? x_at<T>(p, b, c0 + i, t0 - H + h) : 0.f;
      ga[h][i] = 0.f;  // g' before t0 only reaches dx before t0, not emitted here
    }
  }
  float dw[VC][K] = {}, db[VC] = {};

  auto chunk = [&](auto edge, int tc, int s) {
    constexpr bool kEdge = decltype(edge)::value;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = tc + u;
      if (kEdge && t >= t0 + nsteps) break;  // warp-uniform
      float gv[VC];
      read_slot<T>(slot(s, 0, u), xa[H + u]);
      read_slot<T>(slot(s, 1, u), gv);
      const int id = ia[H + u];  // of output t (steps past L: -1)
#pragma unroll
      for (int i = 0; i < VC; ++i) {
        if (kSeq && id < 0) {
          gv[i] = 0.f;
        } else if (kSilu) {  // zero-filled steps past L give g' = 0
          const float pre = tap_sum<K, kSeq>(bias[i], w[i], [&](int k) { return xa[u + k][i]; },
                                             [&](int k) { return ia[u + k] == id; });
          gv[i] = silu_grad(gv[i], pre);
        }
        ga[H + u][i] = gv[i];
      }
      if (!kEdge || t < t1) {  // this segment owns output t's dweight/dbias terms
#pragma unroll
        for (int i = 0; i < VC; ++i) {
          db[i] += gv[i];
          add_tap_terms<K, kSeq>(dw[i], gv[i], [&](int k) { return xa[u + k][i]; },
                                 [&](int k) { return ia[u + k] == id; });
        }
      }
      const int tp = t - H;  // input step whose gradient is now complete
      if (!kEdge || (tp >= t0 && tp < t1)) {
        float dxv[VC];
#pragma unroll
        for (int i = 0; i < VC; ++i) {
          float acc = tap_sum<K, kSeq>(0.f, w[i], [&](int k) { return ga[u + H - k][i]; },
                                       [&](int k) { return ia[u + H - k] == ia[u]; });
          if (kEdge && p.has_dfinal && lane_in && tp >= L - H)
            acc += dfinal_at<T>(p, b, c0 + i, tp - (L - H));
          dxv[i] = acc;
        }
        if (lane_in) store_vec<T, VC>(dx + int64_t(tp) * p.dx_t, dxv);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) issue(s, s);
  int stage = 0;
  for (int j = 0; j < nchunks; ++j) {
    // the previous chunk's stage is free: only this lane reads its slots
    issue(j + S::kStages - 1, stage == 0 ? S::kStages - 1 : stage - 1);
    rowpipe::cp_async_wait<S::kStages - 1>();  // chunk j has landed
    const int tc = t0 + j * U;
    if (kSeq) {
#pragma unroll
      for (int u = 0; u < U; ++u) ia[H + u] = __shfl_sync(kFullMask, ids, u);
      ids = chunk_ids(j + 1);
    }
    if (j > 0 && tc + U <= t1) chunk(std::false_type{}, tc, stage);
    else chunk(std::true_type{}, tc, stage);
#pragma unroll
    for (int h = 0; h < H; ++h) {
#pragma unroll
      for (int i = 0; i < VC; ++i) {
        xa[h][i] = xa[U + h][i];
        ga[h][i] = ga[U + h][i];
      }
      ia[h] = ia[U + h];
    }
    stage = stage + 1 == S::kStages ? 0 : stage + 1;
  }
  rowpipe::cp_async_wait<0>();
  __syncthreads();  // every warp's copies have landed before the sums reuse the ring
  finish_segments<K>(p, b, c0, dw, db, sm.red);
}

}  // namespace

template <typename T, int K>
cudaError_t conv1d_bwd::channel_last(const ConvBwdParams &p, const ConvBwdPlan &plan,
                                     cudaStream_t stream) {
  BOOL_SWITCH(plan.vectorized, kVec, [&] {
    BOOL_SWITCH(p.has_seq_idx, kSeq, [&] {
      if (kVec) {  // conv1d_bwd_scan<T, K, true, kSeq> compiles, unlaunched
        BOOL_SWITCH(p.silu, kSilu, [&] {
          conv1d_bwd_scan_ring<T, K, kSilu, kSeq>
              <<<plan.grid, plan.block, 0, stream>>>(p, plan.seg_len);
        });
      } else {
        conv1d_bwd_scan<T, K, kVec, kSeq><<<plan.grid, plan.block, 0, stream>>>(p, plan.seg_len);
      }
    });
  });
  return cudaGetLastError();
}

template cudaError_t conv1d_bwd::channel_last<float, 2>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<float, 3>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<float, 4>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<__half, 2>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<__half, 3>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<__half, 4>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<__nv_bfloat16, 2>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<__nv_bfloat16, 3>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_last<__nv_bfloat16, 4>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
