// The jobs of the softmax backward, one .cu each, as the host launch code calls them (each
// .cu ends with the instantiations it compiles), and the tiling that the plan shares with
// their kernels. No device code: the host planning includes it.
#pragma once

#include <cuda_runtime.h>

#include "softmax_bwd.h"

constexpr int kWarpRows = 4;      // rows (warps) per block of the warp-per-row kernel
constexpr int kMaxChunks = 8;     // C: 16-byte vectors of y and of dy per thread
constexpr int kMaxThreads = 512;  // threads of a C >= 4 block row (16 warp partials)
constexpr int kWarpMaxVecs = 64;  // vectorized rows of more vectors take block rows
// Vectorized rows of 65-1024 vectors: one vector a thread on 128-1024 threads, 2 blocks of
// 1024 an SM at <= 32 registers (C = 2 rows needed 40 registers, or spilled at 4 blocks).
constexpr int kC1Threads = 1024, kBlocksC1 = 2;
// bf16 split rows of 513-1024 vectors without dropout: C = 2 on 512 threads at 4 blocks an
// SM (Liger's tiling), the second vector of y and dy staged in the thread's shared-memory
// slots by cp.async, so that a thread holds one vector in registers (<= 32). fp16 and
// dropout rows keep C = 1: they spilled here, or were slower (BENCHMARKS.md, softmax:
// ideas dropped).
constexpr int kBlocksSplit = 4;
// fp32 rows of 1025-2048 vectors with dropout: C = 4 on 512 threads, 2 blocks an SM at
// <= 64 registers, with the lean block rows below (C = 2 on 1024 threads, one block an SM,
// ran slower and unsteadily).
constexpr int kBlocksC4Fp32 = 2;
// fp32 split rows of 1025-2048 vectors without dropout (softmax_bwd_split_kernel): C = 4
// on 512 threads, chunks 2-3 staged in shared memory, 3 blocks an SM at <= 40 registers
// (the plain C = 4 kernel spilled at 3 blocks and was slower).
constexpr int kBlocksSplitF32 = 3;
// Scalar block rows: 16-bit elements loaded one by one sit in a register each until
// packed, so a thread needs up to ~160 registers there (512 threads would cap it at 128)
constexpr int kMaxThreadsScalar = 256;

namespace sm_bwd {

// dx of a plan's warp rows (kWarp: one warp a row, kWarpRows rows a block) or block rows
// (one block a row), C 16-byte vectors of y and dy a thread held in registers, kStream:
// the rest of the row streamed twice (softmax_bwd_rows.cu). T: dtype of y, dy, dx.
template <typename T, int C, bool kWarp, bool kStream>
cudaError_t rows(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan, cudaStream_t stream);
// dx of a plan's split rows, their last chunks staged in shared memory: bf16 at C = 2, fp32
// at C = 4 (softmax_bwd_split.cu).
template <typename T>
cudaError_t split(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan, cudaStream_t stream);

}  // namespace sm_bwd
