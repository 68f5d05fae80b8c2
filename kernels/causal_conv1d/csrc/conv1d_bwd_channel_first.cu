// Causal conv1d backward, x time-contiguous (channel-first): a warp scans a span of one
// (batch, channel) row in tiles of 32 lanes x 16 bytes. Vectorized rows without seq_idx
// stream the tiles right to left through a per-warp shared-memory ring (cp.async,
// conv1d_bwd_rows_ring): each step's g' is computed once, and the halos come from the ring
// and one shuffle. The others scan left to right, prefetching the next tile into
// registers, halos through shuffles (conv1d_bwd_rows). Each warp writes its span's
// dweight/dbias partial sums to a workspace row (conv1d_bwd_reduce.cu adds them).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/row_pipeline.cuh"
#include "../../common/csrc/static_switch.h"
#include "conv1d_bwd_kernels.cuh"
#include "conv1d_bwd_launchers.h"

namespace {

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
__global__ void __launch_bounds__(32 * kRowWarps)
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
// recomputes the right halo's SiLU and moves both halos through shuffles: a quarter more
// instructions an element, and slower (docs/benchmark-history.md). 6 stages at 8 blocks an
// SM: 8 stages at 6 or 4 blocks were slower (BENCHMARKS.md, causal conv1d: ideas dropped).
constexpr int kRowStages = 6;
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

}  // namespace

template <typename T, int K>
cudaError_t conv1d_bwd::channel_first(const ConvBwdParams &p, const ConvBwdPlan &plan,
                                      cudaStream_t stream) {
  BOOL_SWITCH(plan.vectorized, kVec, [&] {
    BOOL_SWITCH(p.has_seq_idx, kSeq, [&] {
      if (kVec && !kSeq) {  // conv1d_bwd_rows<T, K, true, false> compiles, unlaunched
        BOOL_SWITCH(p.silu, kSilu, [&] {
          conv1d_bwd_rows_ring<T, K, kSilu>
              <<<plan.grid, plan.block, 0, stream>>>(p, plan.tiles_per_span);
        });
      } else {
        conv1d_bwd_rows<T, K, kVec, kSeq>
            <<<plan.grid, plan.block, 0, stream>>>(p, plan.tiles_per_span);
      }
    });
  });
  return cudaGetLastError();
}

template cudaError_t conv1d_bwd::channel_first<float, 2>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<float, 3>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<float, 4>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<__half, 2>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<__half, 3>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<__half, 4>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<__nv_bfloat16, 2>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<__nv_bfloat16, 3>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
template cudaError_t conv1d_bwd::channel_first<__nv_bfloat16, 4>(const ConvBwdParams &, const ConvBwdPlan &, cudaStream_t);
