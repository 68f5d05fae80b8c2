// Causal depthwise conv1d backward (Dao's causal-conv1d semantics), deterministic.
//
// Per output t: pre = bias + sum_k M(t,k) w[k] xc[t+k] (xc = [initial states, x]),
// g' = dout * silu'(pre) (or dout), zero at padding ids; dx[p] gathers w[k] g'[p+H-k]
// (H = K-1), plus the dfinal_states copy path for the last H steps; dweight/dbias are
// sums of g' * x and g' over batch and time. All arithmetic in fp32, one rounding at the
// store. dweight/dbias: each block writes its partial sums to a workspace row and a second
// kernel adds the rows in a fixed order, so results are bitwise reproducible.
//
// Two kernels by memory layout of x:
//  - channel-first (time contiguous): a warp scans a span of one (batch, channel) row in
//    tiles of 32 lanes x 16 bytes. Vectorized rows without seq_idx stream the tiles right
//    to left through a per-warp shared-memory ring (cp.async, conv1d_bwd_rows_ring): each
//    step's g' is computed once, and the halos come from the ring and one shuffle. The
//    others scan left to right, prefetching the next tile into registers, halos through
//    shuffles (conv1d_bwd_rows).
//  - channel-last (channel contiguous): a thread owns 4 consecutive channels and scans a
//    segment of time; a warp reads 4 x 32 consecutive channels per step (coalesced); the
//    K-1 halo steps before a segment come from the cache. Vectorized problems stream
//    chunks of 8 (16-bit) or 4 (fp32) steps through a per-warp cp.async ring and index
//    each chunk's window at compile time (conv1d_bwd_scan_ring; seq_idx ids a chunk
//    ahead, broadcast by shuffles); the others load 4 steps ahead into registers and
//    shift a window of the last K steps.
//  dinitial_states (only the first K-1 outputs matter) is a small third kernel.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/dtype_dispatch.cuh"
#include "../../common/csrc/row_pipeline.cuh"
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

// The taps the channel-last kernels sum over a K-step window, masked with seq_idx: a step
// counts only if it is in the sequence of the step the sum is for (in(k); always without
// seq_idx). tap_sum: init + sum_k w[k] v(k) (a pre-activation over x, a dx over g');
// add_tap_terms: dw[k] += g v(k) (the dweight terms of one output over x). The
// channel-first scan_tile writes the same loops out: through these helpers its compiled
// code changed (not measured), theirs did not.
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

// ------------------------------------------------------------------ channel-first

// A tile: 32 lanes x one 16-byte vector (kLaneSteps steps) of a row.
template <typename T> constexpr int kLaneSteps = 16 / int(sizeof(T));
template <typename T> constexpr int kRowTile = 32 * kLaneSteps<T>;

// One lane's E steps of a tile: x, dout and ids as loaded.
template <int E> struct LaneTile {
  float x[E], g[E];
  int id[E];
};

template <typename T, int E, bool kVec, bool kSeq>
__device__ __forceinline__ void load_lane(const ConvBwdParams &p, const T *x, const T *dout,
                                          int b, int ts, LaneTile<E> &out) {
  const int L = p.seqlen;
  if (kVec && ts + E <= L) {
    load_vec<T, E>(x + ts, out.x);
    load_vec<T, E>(dout + ts, out.g);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const bool in = ts + i < L;
      out.x[i] = in ? to_f<T>(x[int64_t(ts + i) * p.x_t]) : 0.f;
      out.g[i] = in ? to_f<T>(dout[int64_t(ts + i) * p.dout_t]) : 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < E; ++i) out.id[i] = kSeq ? id_at(p, b, ts + i) : 0;
}

// The (batch, channel) row a warp scans and its span of tiles (grid y), with the row's
// x, dout and dx; false past the last row.
template <typename T> struct RowSpan {
  int b, c, tile_begin, tile_end;
  const T *x, *dout;
  T *dx;
};
template <typename T>
__device__ __forceinline__ bool row_span(const ConvBwdParams &p, int64_t row, int tiles_per_span,
                                         RowSpan<T> &s) {
  constexpr int kTile = kRowTile<T>;
  if (row >= int64_t(p.batch) * p.dim) return false;
  s.b = int(row / p.dim);
  s.c = int(row % p.dim);
  const int ntiles = (p.seqlen + kTile - 1) / kTile;
  s.tile_begin = blockIdx.y * tiles_per_span;
  s.tile_end = min(s.tile_begin + tiles_per_span, ntiles);
  s.x = static_cast<const T *>(p.x) + s.b * p.x_b + s.c * p.x_d;
  s.dout = static_cast<const T *>(p.dout) + s.b * p.dout_b + s.c * p.dout_d;
  s.dx = static_cast<T *>(p.dx) + s.b * p.dx_b + s.c * p.dx_d;
  return true;
}

// The per-row state of a warp's scan: weights, bias, the left halo carried from the previous
// tile, and the lane's dweight/dbias partial sums.
template <int K> struct RowScan {
  float w[K], bias;
  float carry_x[K - 1];  // x and ids of the H steps before lane 0's first step
  int carry_id[K - 1];
  float dw[K], db;
};

// A row's weights, with its dweight/dbias partials zeroed.
template <int K>
__device__ __forceinline__ void start_sums(const ConvBwdParams &p, int c, RowScan<K> &r) {
  load_weights<K>(p, c, r.w, r.bias);
#pragma unroll
  for (int k = 0; k < K; ++k) r.dw[k] = 0.f;
  r.db = 0.f;
}

template <typename T, int K, bool kSeq>
__device__ __forceinline__ void start_row(const ConvBwdParams &p, int b, int c, int tile_begin,
                                          RowScan<K> &r) {
  constexpr int H = K - 1;
  constexpr int kTile = kRowTile<T>;
  start_sums<K>(p, c, r);
  const int tl = tile_begin * kTile - H;
#pragma unroll
  for (int h = 0; h < H; ++h) {
    r.carry_x[h] = x_at<T>(p, b, c, tl + h);
    r.carry_id[h] = kSeq ? id_at(p, b, tl + h) : 0;
  }
}

// One tile of a warp's scan: the lane's E steps at ts (cur), with the next tile's (nxt:
// only lane 0's first H steps are used, for lane 31's right halo) when has_next. Writes
// dx, adds to the lane's dweight/dbias partials, carries the left halo on.
// kInterior: the caller knows that a next tile follows and that every step of this one
// lies before L - H, so no step or right halo is past the end, no halo comes from memory
// and no step has a dfinal_states term (most tiles of a long row).
template <typename T, int K, bool kVec, bool kSeq, bool kInterior>
__device__ __forceinline__ void scan_tile(const ConvBwdParams &p, const T *dout, T *dx, int b,
                                          int c, int ts, bool has_next,
                                          const LaneTile<kLaneSteps<T>> &cur,
                                          const LaneTile<kLaneSteps<T>> &nxt, RowScan<K> &r) {
  constexpr int H = K - 1;
  constexpr int E = kLaneSteps<T>;
  const int L = p.seqlen;
  const int lane = threadIdx.x % 32;
    // windows: xw[m] is x at ts - H + m, gw[j] dout (then g') at ts + j, idw like xw
    float xw[E + 2 * H], gw[E + H];
    int idw[E + 2 * H];
#pragma unroll
    for (int i = 0; i < E; ++i) {
      xw[H + i] = cur.x[i];
      gw[i] = cur.g[i];
      idw[H + i] = cur.id[i];
    }
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const float xl = __shfl_up_sync(kFullMask, cur.x[E - H + h], 1);
      const int il = __shfl_up_sync(kFullMask, cur.id[E - H + h], 1);
      xw[h] = lane == 0 ? r.carry_x[h] : xl;
      idw[h] = lane == 0 ? r.carry_id[h] : il;
      // right halo: the next lane's first steps; lane 31 takes lane 0's of the next tile
      float xr = __shfl_down_sync(kFullMask, cur.x[h], 1);
      float gr = __shfl_down_sync(kFullMask, cur.g[h], 1);
      int ir = __shfl_down_sync(kFullMask, cur.id[h], 1);
      const float xn = __shfl_sync(kFullMask, nxt.x[h], 0);
      const float gn = __shfl_sync(kFullMask, nxt.g[h], 0);
      const int in = __shfl_sync(kFullMask, nxt.id[h], 0);
      const int tr = ts + E + h;
      if (kInterior) {
        if (lane == 31) {
          xr = xn; gr = gn; ir = in;
        }
      } else if (lane == 31) {
        if (has_next) {
          xr = xn; gr = gn; ir = in;
        } else {
          xr = x_at<T>(p, b, c, tr);
          gr = tr < L ? to_f<T>(dout[int64_t(tr) * p.dout_t]) : 0.f;
          ir = kSeq ? id_at(p, b, tr) : 0;
        }
      } else if (ts + E > L) {  // a partial lane: its neighbours are past the end
        xr = 0.f; gr = 0.f; ir = -1;
      }
      xw[H + E + h] = xr;
      gw[E + h] = gr;
      idw[H + E + h] = ir;
    }
#pragma unroll
    for (int h = 0; h < H; ++h) {
      r.carry_x[h] = __shfl_sync(kFullMask, cur.x[E - H + h], 31);
      r.carry_id[h] = __shfl_sync(kFullMask, cur.id[E - H + h], 31);
    }

    // g' for outputs ts .. ts + E + H - 1 (the last H belong to the next lane; recomputed)
#pragma unroll
    for (int j = 0; j < E + H; ++j) {
      const int id = idw[j + H];
      float g = gw[j];
      if ((!kInterior && ts + j >= L) || (kSeq && id < 0)) {
        g = 0.f;
      } else if (p.silu) {
        float pre = r.bias;
#pragma unroll
        for (int k = 0; k < K; ++k) pre += (!kSeq || idw[j + k] == id ? r.w[k] * xw[j + k] : 0.f);
        g = silu_grad(g, pre);
      }
      gw[j] = g;
    }
#pragma unroll
    for (int j = 0; j < E; ++j) {
      r.db += gw[j];
#pragma unroll
      for (int k = 0; k < K; ++k)
        r.dw[k] += (!kSeq || idw[j + k] == idw[j + H] ? gw[j] * xw[j + k] : 0.f);
    }

    float dxo[E];
#pragma unroll
    for (int i = 0; i < E; ++i) {
      const int id = idw[i + H];  // of input step ts + i
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k)
        acc += (!kSeq || idw[i + 2 * H - k] == id ? r.w[k] * gw[i + H - k] : 0.f);
      const int j = ts + i - (L - H);  // dfinal_states slot this step was copied to
      if (!kInterior && p.has_dfinal && j >= 0 && ts + i < L) acc += dfinal_at<T>(p, b, c, j);
      dxo[i] = acc;
    }
    if (kVec && (kInterior || ts + E <= L)) {
      store_vec<T, E>(dx + ts, dxo);
    } else {
#pragma unroll
      for (int i = 0; i < E; ++i)
        if (kInterior || ts + i < L) dx[int64_t(ts + i) * p.dx_t] = from_f<T>(dxo[i]);
    }
}

// scan_tile, on its interior instance where the tile allows it (a warp-uniform choice).
template <typename T, int K, bool kVec, bool kSeq>
__device__ __forceinline__ void scan_any_tile(const ConvBwdParams &p, const T *dout, T *dx,
                                              int b, int c, int tile, int ts, bool has_next,
                                              const LaneTile<kLaneSteps<T>> &cur,
                                              const LaneTile<kLaneSteps<T>> &nxt,
                                              RowScan<K> &r) {
  constexpr int kTile = kRowTile<T>;
  if (has_next && int64_t(tile + 1) * kTile + (K - 1) <= p.seqlen)
    scan_tile<T, K, kVec, kSeq, true>(p, dout, dx, b, c, ts, has_next, cur, nxt, r);
  else
    scan_tile<T, K, kVec, kSeq, false>(p, dout, dx, b, c, ts, has_next, cur, nxt, r);
}

// The lane's dweight/dbias partials, summed over the warp in a fixed order, into the
// workspace row of (batch, span).
template <int K>
__device__ __forceinline__ void finish_row(const ConvBwdParams &p, int b, int c, RowScan<K> &r) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    r.db += __shfl_xor_sync(kFullMask, r.db, off);
#pragma unroll
    for (int k = 0; k < K; ++k) r.dw[k] += __shfl_xor_sync(kFullMask, r.dw[k], off);
  }
  if (threadIdx.x % 32 == 0) {
    const int64_t part = int64_t(b) * gridDim.y + blockIdx.y;
    float *ws = p.ws + (part * p.dim + c) * (K + 1);
#pragma unroll
    for (int k = 0; k < K; ++k) ws[k] = r.dw[k];
    ws[K] = r.db;
  }
}

// A warp scans a span of consecutive tiles (32 lanes x E steps each) of one (batch,
// channel) row. The next tile is loaded before the current one is computed; halos come
// from neighbour lanes, across tiles from lane 31 of the previous tile and lane 0 of the
// prefetched next tile, and from memory only at the span's two ends.
template <typename T, int K, bool kVec, bool kSeq>
__global__ void __launch_bounds__(128)
conv1d_bwd_rows(const ConvBwdParams p, const int tiles_per_span) {
  constexpr int E = kLaneSteps<T>, kTile = kRowTile<T>;
  const int L = p.seqlen;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  RowSpan<T> span;
  // whole warps return: no shuffles left behind
  if (!row_span(p, int64_t(blockIdx.x) * (blockDim.x / 32) + warp, tiles_per_span, span)) return;
  const int b = span.b, c = span.c, tile_begin = span.tile_begin, tile_end = span.tile_end;
  const T *x = span.x, *dout = span.dout;
  T *dx = span.dx;

  RowScan<K> r;
  start_row<T, K, kSeq>(p, b, c, tile_begin, r);
  LaneTile<E> cur, nxt;
  load_lane<T, E, kVec, kSeq>(p, x, dout, b, min(tile_begin * kTile + lane * E, L), cur);
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int ts = min(tile * kTile + lane * E, L);  // lanes past the end compute zeros
    const bool has_next = tile + 1 < tile_end;
    if (has_next) load_lane<T, E, kVec, kSeq>(p, x, dout, b, min(ts + kTile, L), nxt);
    scan_any_tile<T, K, kVec, kSeq>(p, dout, dx, b, c, tile, ts, has_next, cur, nxt, r);
    cur = nxt;
  }
  finish_row<K>(p, b, c, r);
}

// Vectorized rows without seq_idx: a warp scans its span's tiles from the last to the
// first, streaming them through its own shared-memory ring (cp.async, kRowStages tiles:
// kRowStages - 2 beyond the next in flight while one is computed). Right to left, each
// lane computes g' of its own E steps once: the g' right halo (the next lane's first H
// steps) comes by one rotating shuffle, lane 31's from lane 0 of the tile scanned before,
// and the x left halo is read from the ring slot of the lane before (lane 0: lane 31's of
// the tile scanned next, already in the ring). The left-to-right scan (conv1d_bwd_rows)
// recomputes the right halo's SiLU and moves both halos through shuffles: 53.6
// instructions an element at 8,4096,2048,4 bf16 silu against 41.8 here (ncu), and 0.60 of
// the copy bandwidth against 0.75 over the channel-first perf cases (geomean, one run;
// BENCHMARKS.md 2026-11-30, fifth session). 6 stages at 8 blocks an SM measured above 8
// stages at 6 and 4 blocks (0.75, 0.71, 0.71).
constexpr int kRowStages = 6;
constexpr int kRowWarps = 4;      // warps of a block
constexpr int kRowMinBlocks = 8;  // blocks an SM: <= 64 registers, 8 x 25 KiB of ring

// x of the H steps before a lane's E steps: the last H elements of a 16-byte ring slot.
template <typename T, int H>
__device__ __forceinline__ void read_left_halo(unsigned slot, float (&xl)[H]) {
  constexpr int E = kLaneSteps<T>;
  if constexpr (sizeof(T) == 2 && H <= 4) {  // the slot's upper 8 bytes hold its last 4
    union { uint2 u; T e[4]; } v;
    v.u = rowpipe::lds8(slot + 8);
#pragma unroll
    for (int h = 0; h < H; ++h) xl[h] = to_f<T>(v.e[4 - H + h]);
  } else {
    union { uint4 u; T e[E]; } v;
    v.u = rowpipe::lds16(slot);
#pragma unroll
    for (int h = 0; h < H; ++h) xl[h] = to_f<T>(v.e[E - H + h]);
  }
}

// g' at step t of a row (0 past the end), from memory: the right halo of a span that
// ends inside the row.
template <typename T, int K, bool kSilu>
__device__ __forceinline__ float g_at(const ConvBwdParams &p, const T *dout, int b, int c,
                                      int t, const RowScan<K> &r) {
  if (t >= p.seqlen) return 0.f;
  float g = to_f<T>(dout[t]);
  if (kSilu) {
    float pre = r.bias;
#pragma unroll
    for (int k = 0; k < K; ++k) pre += r.w[k] * x_at<T>(p, b, c, t - (K - 1) + k);
    g = silu_grad(g, pre);
  }
  return g;
}

template <typename T, int K, bool kSilu>
__global__ void __launch_bounds__(32 * kRowWarps, kRowMinBlocks)
conv1d_bwd_rows_ring(const ConvBwdParams p, const int tiles_per_span) {
  constexpr int H = K - 1, E = kLaneSteps<T>, kTile = kRowTile<T>;
  static_assert(E >= H, "the g' right halo comes from the next lane alone");
  // [warp][stage][x, dout][lane] 16-byte slots; [warp] the x before the span in the last
  // H elements (lane 0's left halo at the span's first tile)
  __shared__ uint4 ring[kRowWarps][kRowStages][2][32];
  __shared__ uint4 before[kRowWarps];
  const int L = p.seqlen;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  RowSpan<T> span;
  // whole warps return: no shuffles left behind
  if (!row_span(p, int64_t(blockIdx.x) * kRowWarps + warp, tiles_per_span, span)) return;
  const int b = span.b, c = span.c, tile_end = span.tile_end;
  const int ntiles = tile_end - span.tile_begin;
  const T *x = span.x, *dout = span.dout;
  constexpr unsigned kStageBytes = 2 * 32 * 16, kHalfBytes = 32 * 16;
  const unsigned slot0 = rowpipe::smem_addr(&ring[warp][0][0][lane]);
  const unsigned slot_last = slot0 + (kRowStages - 1) * kStageBytes;
  const unsigned before_slot = rowpipe::smem_addr(&before[warp]);
  // the lane's first step in the span's last tile; each tile scanned is kTile to the left
  const int ts_last = (tile_end - 1) * kTile + lane * E;

  int issue_ts = ts_last, issued = 0;  // the next tile to copy: the lane's first step
  unsigned issue_slot = slot0;         // and its stage's slot
  auto issue = [&]() {
    if (issued < ntiles) {
      // past L (a row's last tile): zero-filled
      const int bytes = rowpipe::bytes_before(issue_ts, L, E, int(sizeof(T)));
      const int off = bytes ? issue_ts : 0;
      rowpipe::cp_async16(issue_slot, x + off, bytes);
      rowpipe::cp_async16(issue_slot + kHalfBytes, dout + off, bytes);
    }
    rowpipe::cp_async_commit();  // empty groups too: the waits count groups
    ++issued;
    issue_ts -= kTile;
    issue_slot = issue_slot == slot_last ? slot0 : issue_slot + kStageBytes;
  };
#pragma unroll
  for (int s = 0; s < kRowStages - 1; ++s) issue();

  RowScan<K> r;
  start_sums<K>(p, c, r);
  if (lane < H) {  // the x before the span, as stored (exact: x is T)
    const int t = span.tile_begin * kTile - H + lane;
    reinterpret_cast<T *>(&before[warp])[E - H + lane] = from_f<T>(x_at<T>(p, b, c, t));
  }
  float carry_g[H];  // lane 31: g' of the H steps after its own, in the tile to the right
#pragma unroll
  for (int h = 0; h < H; ++h) carry_g[h] = 0.f;
  if (tile_end * kTile < L) {  // the span ends inside the row
#pragma unroll
    for (int h = 0; h < H; ++h)
      carry_g[h] = g_at<T, K, kSilu>(p, dout, b, c, tile_end * kTile + h, r);
  }

  int ts = ts_last;
  T *dxp = span.dx + ts_last;
  unsigned own = slot0;
  for (int i = 0; i < ntiles; ++i) {
    rowpipe::cp_async_wait<kRowStages - 3>();  // tiles i and i + 1 have landed ...
    __syncwarp();  // ... for every lane (halos cross slots), and stage i - 1 was read
    issue();       // into stage i - 1
    const unsigned next = own == slot_last ? slot0 : own + kStageBytes;
    // x left halo: the last H steps of the lane before; lane 0: lane 31's in the tile to
    // the left (scanned next), or the x before the span
    const unsigned left = lane != 0 ? own - 16 : i + 1 < ntiles ? next + 31 * 16 : before_slot;
    // steps at or past L - H: dfinal_states terms, steps past the end (warp-uniform)
    const bool edge = int64_t(tile_end - i) * kTile + H > L;

    // xw[m]: x at ts - H + m; gw[j]: dout, then g', at ts + j
    float xw[H + E], gw[E + H];
    {
      float xl[H];
      read_left_halo<T, H>(left, xl);
#pragma unroll
      for (int h = 0; h < H; ++h) xw[h] = xl[h];
      union { uint4 u; T e[E]; } vx, vg;
      vx.u = rowpipe::lds16(own);
      vg.u = rowpipe::lds16(own + kHalfBytes);
#pragma unroll
      for (int j = 0; j < E; ++j) {
        xw[H + j] = to_f<T>(vx.e[j]);
        gw[j] = to_f<T>(vg.e[j]);
      }
    }
    if (kSilu) {  // zero-filled steps past L give g' = 0
#pragma unroll
      for (int j = 0; j < E; ++j) {
        float pre = r.bias;
#pragma unroll
        for (int k = 0; k < K; ++k) pre += r.w[k] * xw[j + k];
        gw[j] = silu_grad(gw[j], pre);
      }
    }
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const float nb = __shfl_sync(kFullMask, gw[h], (lane + 1) % 32);
      gw[E + h] = lane == 31 ? carry_g[h] : nb;
      carry_g[h] = nb;  // lane 31 keeps lane 0's for the tile to the left
    }
#pragma unroll
    for (int j = 0; j < E; ++j) {
      r.db += gw[j];
#pragma unroll
      for (int k = 0; k < K; ++k) r.dw[k] += gw[j] * xw[j + k];
    }
    float dxo[E];
#pragma unroll
    for (int j = 0; j < E; ++j) {
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) acc += r.w[k] * gw[j + H - k];
      dxo[j] = acc;
    }
    if (edge && p.has_dfinal) {
#pragma unroll
      for (int j = 0; j < E; ++j) {
        const int f = ts + j - (L - H);  // dfinal_states slot this step was copied to
        if (f >= 0 && ts + j < L) dxo[j] += dfinal_at<T>(p, b, c, f);
      }
    }
    if (!edge || ts + E <= L) {
      store_vec<T, E>(dxp, dxo);
    } else {
#pragma unroll
      for (int j = 0; j < E; ++j)
        if (ts + j < L) dxp[j] = from_f<T>(dxo[j]);
    }
    ts -= kTile;
    dxp -= kTile;
    own = next;
  }
  rowpipe::cp_async_wait<0>();
  finish_row<K>(p, b, c, r);
}

// ------------------------------------------------------------------ channel-last

constexpr int kChannelsPerThread = 4;  // 8-byte (16-bit) or 16-byte (fp32) accesses
constexpr int kLanesC = 32;            // threads of a warp side by side along channels
constexpr int kSegments = 4;           // warps of a block: consecutive time segments
constexpr int kPrefetch = 4;           // time steps loaded ahead of their use

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

// Vectorized channel-last problems without seq_idx: conv1d_bwd_scan's scan in chunks of
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

// ------------------------------------------------------------------ initial states

// dinitial_states, one thread per (batch, channel): the K-1 state slots feed outputs
// 0 .. K-2 only, so their g' is recomputed here instead of carried through the main scan.
template <typename T, int K>
__global__ void conv1d_bwd_dinit(const ConvBwdParams p) {
  constexpr int H = K - 1;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(p.batch) * p.dim) return;
  const int b = int(idx / p.dim), c = int(idx % p.dim);
  const int L = p.seqlen;
  float w[K], bias;
  load_weights<K>(p, c, w, bias);
  const T *dout = static_cast<const T *>(p.dout) + b * p.dout_b + c * p.dout_d;

  float g[H];
  int id_out[H];
#pragma unroll
  for (int t = 0; t < H; ++t) {
    id_out[t] = id_at(p, b, t);
    g[t] = 0.f;
    if (t < L && id_out[t] >= 0) {
      g[t] = to_f<T>(dout[int64_t(t) * p.dout_t]);
      if (p.silu) {
        float pre = bias;
#pragma unroll
        for (int k = 0; k < K; ++k)
          pre += (id_at(p, b, t - H + k) == id_out[t] ? w[k] * x_at<T>(p, b, c, t - H + k) : 0.f);
        g[t] = silu_grad(g[t], pre);
      }
    }
  }
  const int id_slot = id_at(p, b, -1);
#pragma unroll
  for (int s = 0; s < H; ++s) {
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k <= s; ++k) acc += (id_slot == id_out[s - k] ? w[k] * g[s - k] : 0.f);
    if (p.has_dfinal && s >= L) acc += dfinal_at<T>(p, b, c, s - L);
    static_cast<T *>(p.dinit)[b * p.dinit_b + c * p.dinit_d + s * p.dinit_t] = from_f<T>(acc);
  }
}

// ------------------------------------------------------------------ second stage

template <typename W>
__global__ void conv1d_bwd_reduce(const ConvBwdParams p, const int parts) {
  wait_for_primary();  // launched as a programmatic dependent of the main kernel (or dinit)
  const int K = p.width;
  const int64_t n = int64_t(p.dim) * (K + 1);
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  float s = 0.f;
  for (int r = 0; r < parts; ++r) s += p.ws[r * n + idx];  // fixed order
  const int c = int(idx / (K + 1)), k = int(idx % (K + 1));
  if (k < K) {
    static_cast<W *>(p.dweight)[c * p.dw_d + k * p.dw_k] = from_f<W>(s);
  } else if (p.has_bias) {
    static_cast<W *>(p.dbias)[c * p.dbias_d] = from_f<W>(s);
  }
}

bool aligned(const void *ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

constexpr int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z
constexpr int64_t kMinBlocks = 384;     // channel-last: 3 blocks on each of an H200's 132 SMs
constexpr int64_t kMinRowWarps = 4224;  // channel-first: 32 warps on each of an H200's 132 SMs

int elem_size(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }

template <typename T, int K, bool kVec, bool kSeq>
void launch_main(const ConvBwdParams &p, const ConvBwdPlan &plan, cudaStream_t s) {
  if (plan.channel_first && kVec && !kSeq && p.silu)
    conv1d_bwd_rows_ring<T, K, true><<<plan.grid, plan.block, 0, s>>>(p, plan.tiles_per_span);
  else if (plan.channel_first && kVec && !kSeq)
    conv1d_bwd_rows_ring<T, K, false><<<plan.grid, plan.block, 0, s>>>(p, plan.tiles_per_span);
  else if (plan.channel_first)
    conv1d_bwd_rows<T, K, kVec, kSeq><<<plan.grid, plan.block, 0, s>>>(p, plan.tiles_per_span);
  else if (kVec && p.silu)
    conv1d_bwd_scan_ring<T, K, true, kSeq><<<plan.grid, plan.block, 0, s>>>(p, plan.seg_len);
  else if (kVec)
    conv1d_bwd_scan_ring<T, K, false, kSeq><<<plan.grid, plan.block, 0, s>>>(p, plan.seg_len);
  else
    conv1d_bwd_scan<T, K, kVec, kSeq><<<plan.grid, plan.block, 0, s>>>(p, plan.seg_len);
}

template <typename T, int K>
void launch_width(const ConvBwdParams &p, const ConvBwdPlan &plan, cudaStream_t s) {
  // compile-time switches: vector accesses and packed-sequence masks
  if (plan.vectorized) {
    if (p.has_seq_idx) launch_main<T, K, true, true>(p, plan, s);
    else launch_main<T, K, true, false>(p, plan, s);
  } else {
    if (p.has_seq_idx) launch_main<T, K, false, true>(p, plan, s);
    else launch_main<T, K, false, false>(p, plan, s);
  }
  if (p.want_dinit) {
    const int64_t n = int64_t(p.batch) * p.dim;
    conv1d_bwd_dinit<T, K><<<unsigned((n + 127) / 128), 128, 0, s>>>(p);
  }
}

template <typename T>
cudaError_t launch_typed(const ConvBwdParams &p, const ConvBwdPlan &plan, cudaStream_t s) {
  switch (p.width) {
    case 2: launch_width<T, 2>(p, plan, s); break;
    case 3: launch_width<T, 3>(p, plan, s); break;
    case 4: launch_width<T, 4>(p, plan, s); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

ConvBwdPlan conv1d_bwd_plan(const ConvBwdParams &p) {
  ConvBwdPlan plan{};
  const int es = elem_size(p.x_dtype);
  const int64_t L = p.seqlen;
  plan.channel_first = p.x_t == 1 && p.dim > 0;
  if (plan.channel_first) {
    const int E = 16 / es;
    const int64_t tile = 32 * E;
    const int64_t ntiles = (L + tile - 1) / tile;
    const int64_t rows = int64_t(p.batch) * p.dim;
    // Rows are independent warps. Each span of a row pays a setup, an edge tile and a
    // workspace row, so spans are long: 32 tiles, halved (down to 8) while the grid would
    // hold fewer than kMinRowWarps warps, and longer where they would exceed the grid's y
    // limit. (H200, one run: 8 -> 32 tiles 0.83 -> 0.91 of the copy bandwidth at
    // B=16 D=1536 L=4096 K=3 bf16, 0.79 -> 0.91 at B=2 D=8192 L=8192, fp32 0.91-0.93 ->
    // 0.96; rows of at most 8 tiles unchanged.)
    int64_t tps = 32;
    while (tps > 8 && rows * ((ntiles + tps - 1) / tps) < kMinRowWarps) tps /= 2;
    plan.tiles_per_span = int(std::max<int64_t>(std::min<int64_t>(ntiles, tps),
                                                (ntiles + kMaxGridYZ - 1) / kMaxGridYZ));
    const int64_t spans = (ntiles + plan.tiles_per_span - 1) / plan.tiles_per_span;
    plan.vectorized = p.dout_t == 1 && p.dx_t == 1 && p.x_b % E == 0 && p.x_d % E == 0 &&
                      p.dout_b % E == 0 && p.dout_d % E == 0 && p.dx_b % E == 0 &&
                      p.dx_d % E == 0 && aligned(p.x, 16) && aligned(p.dout, 16) &&
                      aligned(p.dx, 16);
    plan.grid = dim3(unsigned((rows + 3) / 4), unsigned(std::max<int64_t>(1, spans)), 1);
    plan.block = dim3(128);
    plan.parts = int(p.batch * std::max<int64_t>(1, spans));
  } else {
    const int VC = kChannelsPerThread;
    const int cblocks = (p.dim + kLanesC * VC - 1) / (kLanesC * VC);
    auto time_blocks = [&](int64_t seg) { return (L + kSegments * seg - 1) / (kSegments * seg); };
    // Long segments amortise the K-1 halo steps (recomputed by the next segment) and a
    // segment's two edge chunks: 128 steps, halved (down to 32) while the grid would hold
    // fewer than kMinBlocks blocks, and longer where the segments would exceed the grid's
    // y limit. (H200, B=8 D=4096 L=2048 bf16: 128 steps 0.72 of the copy bandwidth, 64
    // steps 0.63; B=4 D=2048 L=512: 64 steps 0.25, 128 steps 0.21.)
    int64_t seg = 128;
    while (seg > 32 && int64_t(cblocks) * p.batch * time_blocks(seg) < kMinBlocks) seg /= 2;
    const int64_t per_block = kSegments * kMaxGridYZ;
    plan.seg_len = int(std::max<int64_t>(seg, (L + per_block - 1) / per_block));
    const int64_t tblocks = time_blocks(plan.seg_len);
    const int vb = VC * es;
    plan.vectorized = p.x_d == 1 && p.dout_d == 1 && p.dx_d == 1 && p.dim % VC == 0 &&
                      p.x_b % VC == 0 && p.x_t % VC == 0 && p.dout_b % VC == 0 &&
                      p.dout_t % VC == 0 && p.dx_b % VC == 0 && p.dx_t % VC == 0 &&
                      aligned(p.x, vb) && aligned(p.dout, vb) && aligned(p.dx, vb);
    // grid z: one index a batch (the binding refuses more than kMaxGridYZ batches here)
    plan.grid = dim3(unsigned(cblocks), unsigned(std::max<int64_t>(1, tblocks)), unsigned(p.batch));
    plan.block = dim3(kLanesC * kSegments);
    plan.parts = int(p.batch * std::max<int64_t>(1, tblocks));
  }
  return plan;
}

cudaError_t conv1d_bwd_launch(const ConvBwdParams &p, const ConvBwdPlan &plan,
                              cudaStream_t stream) {
  const cudaError_t err = with_dtype(p.x_dtype, [&](auto t) {
    return launch_typed<typename decltype(t)::type>(p, plan, stream);
  });
  if (err != cudaSuccess) return err;
  const int64_t n = int64_t(p.dim) * (p.width + 1);
  const dim3 grid(unsigned((n + 255) / 256)), block(256);
  return with_dtype(p.w_dtype, [&](auto w) {
    // A programmatic dependent launch: it overlaps the main kernel's last rows. H200,
    // 2026-11-30 fourteenth session, the 10 channel-first perf cases beside the plain
    // launch and its twin: 0.802 and 0.808 -> 0.822 of the copy bandwidth (geomean); at
    // 2,8192,8192,4 fp32 the plain launch left a 2.2 us gap before this kernel.
    return launch_dependent(conv1d_bwd_reduce<typename decltype(w)::type>, grid, block, stream,
                            p, plan.parts);
  });
}
