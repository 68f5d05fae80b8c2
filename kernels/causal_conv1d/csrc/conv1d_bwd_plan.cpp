// Causal conv1d backward: which kernel and tiling a problem gets (host code only).
//
// Two kernels by memory layout of x: channel-first (time contiguous) rows of one (batch,
// channel) are scanned by warps in spans of tiles (conv1d_bwd_channel_first.cu);
// channel-last (channel contiguous) problems by blocks of 32 x 4 channels and 4 time
// segments (conv1d_bwd_channel_last.cu). dinitial_states is a small third kernel
// (conv1d_bwd_dinit.cu), and dweight/dbias are summed from the workspace rows the main
// kernel writes, in a fixed order, by a second stage (conv1d_bwd_reduce.cu).

#include <algorithm>
#include <cstdint>

#include "../../common/csrc/alignment.h"
#include "conv1d_bwd.h"
#include "conv1d_bwd_launchers.h"

namespace {

constexpr int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z
constexpr int64_t kMinBlocks = 384;     // channel-last: 3 blocks on each of an H200's 132 SMs
constexpr int64_t kMinRowWarps = 4224;  // channel-first: 32 warps on each of an H200's 132 SMs

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
    // limit (8-tile spans were slower: docs/benchmark-history.md).
    int64_t tps = 32;
    while (tps > 8 && rows * ((ntiles + tps - 1) / tps) < kMinRowWarps) tps /= 2;
    plan.tiles_per_span = int(std::max<int64_t>(std::min<int64_t>(ntiles, tps),
                                                (ntiles + kMaxGridYZ - 1) / kMaxGridYZ));
    const int64_t spans = (ntiles + plan.tiles_per_span - 1) / plan.tiles_per_span;
    plan.vectorized = p.dout_t == 1 && p.dx_t == 1 && p.x_b % E == 0 && p.x_d % E == 0 &&
                      p.dout_b % E == 0 && p.dout_d % E == 0 && p.dx_b % E == 0 &&
                      p.dx_d % E == 0 && aligned(p.x, 16) && aligned(p.dout, 16) &&
                      aligned(p.dx, 16);
    plan.grid = dim3(unsigned((rows + kRowWarps - 1) / kRowWarps),
                     unsigned(std::max<int64_t>(1, spans)), 1);
    plan.block = dim3(32 * kRowWarps);
    plan.parts = int(p.batch * std::max<int64_t>(1, spans));
  } else {
    const int VC = kChannelsPerThread;
    const int cblocks = (p.dim + kLanesC * VC - 1) / (kLanesC * VC);
    auto time_blocks = [&](int64_t seg) { return (L + kSegments * seg - 1) / (kSegments * seg); };
    // Long segments amortise the K-1 halo steps (recomputed by the next segment) and a
    // segment's two edge chunks: 128 steps, halved (down to 32) while the grid would hold
    // fewer than kMinBlocks blocks, and longer where the segments would exceed the grid's
    // y limit (measured both ways: docs/benchmark-history.md).
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
