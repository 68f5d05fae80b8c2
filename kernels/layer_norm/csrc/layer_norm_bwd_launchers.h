// The jobs of the LayerNorm backward, one .cu each, as the host launch code calls them
// (each .cu ends with the instantiations it compiles), and the tiling that the plan shares
// with their kernels. No device code: the host planning includes it.
#pragma once

#include <cuda_runtime.h>

#include "../../common/csrc/row_tiling.h"
#include "layer_norm_bwd.h"

constexpr int kMaxTpr = rowpipe::kMaxThreads;  // threads of a row group and of a block
// threads of a block (and at most of a row group) on the scalar path: single-element
// accesses need more registers (their addresses and predicates) than 64
constexpr int kScalarThreads = 256;
// elements of a row a thread holds (C * E): 8 keeps a thread within 64 registers
constexpr int kMaxPerThread = 8;
// ln_bwd_piped's 16-bit rows: 16 elements a thread (half the threads a row, so half the
// reduction work an element), in blocks of 512 threads at up to 128 registers, one an SM
constexpr __host__ __device__ int piped_per_thread(int elem_bytes) {
  return elem_bytes == 2 ? 16 : kMaxPerThread;
}
constexpr __host__ __device__ int piped_threads_per_sm(int elem_bytes) {
  return elem_bytes == 2 ? 512 : rowpipe::kThreadsPerSm;
}

// workspace and shared-memory column-sum rows are n rounded up to 8 floats, on both sides
constexpr __host__ __device__ int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Bytes of gamma a thread of ln_bwd_piped keeps in shared memory: 16-bit rows with gamma
// (8 columns a vector: 32 bytes of fp32 a thread). Read from global memory per pass
// instead, gamma took a third of the kernel's L2 sectors; held in registers next to the
// column sums it spills. fp32 rows hold their 16 or 32 bytes in registers.
constexpr __host__ __device__ int piped_gamma_bytes(int elem_bytes, int chunks, bool affine) {
  return elem_bytes == 2 && affine ? chunks * 8 * 4 : 0;
}

// Ring stages of ln_bwd_piped, each x and dy of `chunks` vectors a thread: one expression
// for the kernel and its host plan, which must agree.
constexpr __host__ __device__ int piped_stages(int elem_bytes, int chunks, bool affine) {
  return rowpipe::ring_stages(2 * chunks * 16, piped_gamma_bytes(elem_bytes, chunks, affine),
                              piped_threads_per_sm(elem_bytes));
}

namespace ln_bwd {

// dx and the dgamma/dbeta column sums of a plan's rows: vectorized rows a group holds,
// through a shared-memory ring (layer_norm_bwd_piped.cu), or the others
// (layer_norm_bwd_rows.cu). T: dtype of x, dy, dx; W: dtype of gamma (float when not
// kAffine); kPartials: column sums into the workspace.
template <typename T, typename W, bool kAffine, bool kPartials>
cudaError_t piped(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t stream);
template <typename T, typename W, bool kAffine, bool kPartials>
cudaError_t rows(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t stream);
// dgamma and dbeta from the workspace's `parts` rows, in a fixed order
// (layer_norm_bwd_cols.cu): W the dtype of gamma.
template <typename W>
cudaError_t cols(const LnBwdParams &p, int parts, cudaStream_t stream);

}  // namespace ln_bwd
