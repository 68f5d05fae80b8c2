// LayerNorm's dgamma/dbeta column sums by the strategies of seed 002 (section 2.4), one
// launch each, so that their costs show side by side (the cuda implementation's row kernels
// fuse the sums into their row pass instead). All arithmetic in fp32, one rounding to
// w_dtype at the end.
//
//  (a) kColumnPerThread: thread j sums column j over all rows. Coalesced across a warp,
//      but only n threads in all, each adding `rows` terms in sequence.
//  (b) kAtomic: the grid of (c) below; every thread atomicAdd-s its two partials into an
//      fp32 buffer (32 same-address atomics per column and block queue at L2; the order
//      of additions varies from run to run), then a small kernel rounds the buffer.
//  (c) kTile32 / kTile32Padded (HW4's ker_ln_bw_dgamma_dbetta): a 32x32 block owns 32
//      columns; thread (x, y) sums column x over rows y, y + 32, ... (a warp reads 32
//      adjacent columns of one row: coalesced); partials go to shared buf[y][x]; then
//      warp y reads buf[x][y], the 32 partials of column y, and adds them with shuffles.
//      With buf[32][32] that transposed read hits one bank 32 times (a 32-word stride);
//      buf[32][33] strides 33 words: one access per bank.
//
// (b) and (c) split the rows into P slices (blockIdx.y; seed 002, exercise 7) so that
// n/32 x P blocks fill the GPU; with P > 1 each (c) block writes its 32 columns' partials
// to ws[P][2][n] and a second kernel adds the P partials of each column in a fixed order.
// (a), (c1), (c2) are bitwise reproducible for a given device (P depends on the SM count).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../../common/csrc/convert.cuh"
#include "../../common/csrc/static_switch.h"
#include "dgamma_strategies.h"

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kTile = 32;          // (b), (c): columns of a block, and row lanes per column
constexpr int kColThreads = 32;    // (a): small blocks spread its n threads over more SMs
// (b), (c): aim for SMs x 4 blocks of 1024 threads (two waves at 2 blocks per SM), but give
// each thread at least 4 rows, so that a block's shared-memory round and stores are
// amortized and the workspace stays small
constexpr int kBlocksPerSm = 4, kMinRowsPerThread = 4;
constexpr int kFinCols = 32, kFinSlices = 8;  // the second stage's block

// Adds the terms of column col for rows r0, r0 + kStep, ... (< r1) to ag, ab in row order.
// Pointers advance by a stride (no per-row 64-bit index products): keeps the 32x32 blocks
// within 32 registers, for two resident blocks per SM.
template <typename T, int kStep>
__device__ __forceinline__ void accumulate(const LnBwdParams &p, int col, int64_t r0,
                                           int64_t r1, float &ag, float &ab) {
  const T *x = static_cast<const T *>(p.x) + r0 * p.x_row + col;
  const T *dy = static_cast<const T *>(p.dy) + r0 * p.dy_row + col;
  const float *mean = p.mean + r0, *rstd = p.rstd + r0;
  const int64_t xs = p.x_row * kStep, ds = p.dy_row * kStep;
  // loads of several rows in flight (256 bytes of x and dy per warp and step, fp32 or
  // 16-bit; 4 fp32 rows spill at 32 registers); the additions stay in row order
  constexpr int kUnroll = sizeof(T) == 4 ? 2 : 4;
#pragma unroll kUnroll
  for (int64_t k = (r1 - r0 + kStep - 1) / kStep; k > 0; --k) {
    const float d = to_f<T>(*dy);
    ag += d * ((to_f<T>(*x) - *mean) * *rstd);
    ab += d;
    x += xs;
    dy += ds;
    mean += kStep;
    rstd += kStep;
  }
}

// (a)
template <typename T, typename W>
__global__ void __launch_bounds__(kColThreads) dg_column(const LnBwdParams p) {
  const int col = blockIdx.x * kColThreads + threadIdx.x;
  if (col >= p.n) return;
  float ag = 0.f, ab = 0.f;
  accumulate<T, 1>(p, col, 0, p.rows, ag, ab);
  static_cast<W *>(p.dgamma)[col] = from_f<W>(ag);
  static_cast<W *>(p.dbeta)[col] = from_f<W>(ab);
}

// Rows of this block's slice: [r0, r1) (blockIdx.y-th slice of slice_rows rows).
__device__ __forceinline__ int64_t slice_end(const LnBwdParams &p, int64_t slice_rows) {
  return min(int64_t(blockIdx.y + 1) * slice_rows, p.rows);
}

// (b): block (32, 32), grid (column tiles, P); ws[2][n] zeroed beforehand.
template <typename T>
__global__ void __launch_bounds__(kTile * kTile, 2)
dg_atomic(const LnBwdParams p, const int64_t slice_rows) {
  const int col = blockIdx.x * kTile + threadIdx.x;
  if (col >= p.n) return;
  float ag = 0.f, ab = 0.f;
  accumulate<T, kTile>(p, col, int64_t(blockIdx.y) * slice_rows + threadIdx.y,
                       slice_end(p, slice_rows), ag, ab);
  atomicAdd(p.ws + col, ag);
  atomicAdd(p.ws + p.n + col, ab);
}

// (c): block (32, 32), grid (column tiles, P); kPad 0 is (c1), 1 is (c2). P == 1 rounds
// and stores dgamma/dbeta itself, P > 1 writes its partials to ws[blockIdx.y][2][n].
template <typename T, typename W, int kPad>
__global__ void __launch_bounds__(kTile * kTile, 2)
dg_tile(const LnBwdParams p, const int64_t slice_rows) {
  __shared__ float buf[2][kTile][kTile + kPad];  // dgamma, dbeta partials [row lane][col]
  const int tx = threadIdx.x, ty = threadIdx.y;  // a warp: 32 tx of one ty
  const int cb = blockIdx.x * kTile;
  float ag = 0.f, ab = 0.f;
  if (cb + tx < p.n)
    accumulate<T, kTile>(p, cb + tx, int64_t(blockIdx.y) * slice_rows + ty,
                         slice_end(p, slice_rows), ag, ab);
  buf[0][ty][tx] = ag;  // consecutive words across the warp: no conflict
  buf[1][ty][tx] = ab;
  __syncthreads();
  // transposed: lane tx of warp ty takes row lane tx's partial of column cb + ty; the
  // lanes' words are kTile + kPad apart (kPad 0: all in one bank, 32-way conflict)
  float g = buf[0][tx][ty], b = buf[1][tx][ty];
#pragma unroll
  for (int off = kTile / 2; off > 0; off >>= 1) {  // fixed tree: lane 0 gets the sum
    g += __shfl_down_sync(kFullMask, g, off);
    b += __shfl_down_sync(kFullMask, b, off);
  }
  const int col = cb + ty;
  if (tx != 0 || col >= p.n) return;
  if (gridDim.y == 1) {
    static_cast<W *>(p.dgamma)[col] = from_f<W>(g);
    static_cast<W *>(p.dbeta)[col] = from_f<W>(b);
  } else {
    float *w = p.ws + int64_t(blockIdx.y) * 2 * p.n;
    w[col] = g;
    w[p.n + col] = b;
  }
}

// Second stage of (b) (parts = 1: a conversion) and (c): dgamma (blockIdx.y 0) or dbeta
// (1) of 32 columns; 8 slices (slice s adds parts s, s + 8, ... in order), then the slices
// in order: a fixed order, and 8 loads in flight per column.
template <typename W>
__global__ void __launch_bounds__(kFinCols * kFinSlices)
dg_finish(const LnBwdParams p, const int parts) {
  __shared__ float sh[kFinSlices][kFinCols + 1];
  const int lane = threadIdx.x % kFinCols, slice = threadIdx.x / kFinCols;
  const int which = blockIdx.y;
  const int col = blockIdx.x * kFinCols + lane;
  float s = 0.f;
  if (col < p.n) {
    const float *w = p.ws + int64_t(which) * p.n + col;
#pragma unroll 4
    for (int k = slice; k < parts; k += kFinSlices) s += w[int64_t(k) * 2 * p.n];
  }
  sh[slice][lane] = s;
  __syncthreads();
  if (slice != 0 || col >= p.n) return;
  float total = 0.f;
#pragma unroll
  for (int k = 0; k < kFinSlices; ++k) total += sh[k][lane];
  static_cast<W *>(which ? p.dbeta : p.dgamma)[col] = from_f<W>(total);
}

// Grid of (b) and (c): column tiles x P row slices of slice_rows rows (a multiple of 32).
struct SlicePlan {
  dim3 grid;
  int64_t slice_rows;
  int parts;
};

SlicePlan slice_plan(const LnBwdParams &p, int sm_count) {
  const int64_t tiles = (int64_t(p.n) + kTile - 1) / kTile;
  const int64_t rows = std::max<int64_t>(p.rows, 1);
  const int64_t target = std::min<int64_t>(int64_t(std::max(sm_count, 1)) * kBlocksPerSm,
                                           65535);  // also gridDim.y's limit
  const int64_t want = std::max<int64_t>(1, target / tiles);
  int64_t slice = (rows + want - 1) / want;
  slice = std::max<int64_t>((slice + kTile - 1) / kTile * kTile, kTile * kMinRowsPerThread);
  SlicePlan s;
  s.slice_rows = slice;
  s.parts = int((rows + slice - 1) / slice);  // <= want: no empty slice
  s.grid = dim3(unsigned(tiles), unsigned(s.parts));
  return s;
}

template <typename W>
cudaError_t finish(const LnBwdParams &p, int parts, cudaStream_t stream) {
  const dim3 grid(unsigned((p.n + kFinCols - 1) / kFinCols), 2);
  dg_finish<W><<<grid, kFinCols * kFinSlices, 0, stream>>>(p, parts);
  return cudaGetLastError();
}

}  // namespace

int64_t dgamma_workspace_floats(DgammaStrategy s, const LnBwdParams &p, int sm_count) {
  switch (s) {
    case DgammaStrategy::kAtomic: return 2 * int64_t(p.n);
    case DgammaStrategy::kTile32:
    case DgammaStrategy::kTile32Padded: {
      const int parts = slice_plan(p, sm_count).parts;
      return parts > 1 ? int64_t(parts) * 2 * p.n : 0;
    }
    default: return 0;
  }
}

cudaError_t dgamma_launch(DgammaStrategy s, const LnBwdParams &p, int sm_count,
                          cudaStream_t stream) {
  if (p.n < 0 || p.rows < 0) return cudaErrorInvalidValue;
  if (p.n == 0) return cudaSuccess;  // no columns (rows == 0 gives zero sums below)
  if (dgamma_workspace_floats(s, p, sm_count) > 0 && p.ws == nullptr)
    return cudaErrorInvalidValue;
  const SlicePlan plan = slice_plan(p, sm_count);
  const dim3 tile(kTile, kTile);
  // T: x's dtype, W: dgamma's
  return DTYPE_SWITCH(p.x_dtype, T, [&] {
    return DTYPE_SWITCH(p.w_dtype, W, [&]() -> cudaError_t {
      cudaError_t err = cudaSuccess;
      switch (s) {
        case DgammaStrategy::kColumnPerThread:
          dg_column<T, W><<<unsigned((p.n + kColThreads - 1) / kColThreads), kColThreads, 0,
                            stream>>>(p);
          return cudaGetLastError();
        case DgammaStrategy::kAtomic:
          err = cudaMemsetAsync(p.ws, 0, sizeof(float) * 2 * size_t(p.n), stream);
          if (err != cudaSuccess) return err;
          dg_atomic<T><<<plan.grid, tile, 0, stream>>>(p, plan.slice_rows);
          if ((err = cudaGetLastError()) != cudaSuccess) return err;
          return finish<W>(p, 1, stream);
        case DgammaStrategy::kTile32:
          dg_tile<T, W, 0><<<plan.grid, tile, 0, stream>>>(p, plan.slice_rows);
          break;
        case DgammaStrategy::kTile32Padded:
          dg_tile<T, W, 1><<<plan.grid, tile, 0, stream>>>(p, plan.slice_rows);
          break;
        default: return cudaErrorInvalidValue;
      }
      if ((err = cudaGetLastError()) != cudaSuccess || plan.parts == 1) return err;
      return finish<W>(p, plan.parts, stream);
    });
  });
}
