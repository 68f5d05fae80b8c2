// The jobs of the fused cross entropy, one .cu each, as the host launch code calls them
// (each .cu ends with the instantiations it compiles), and the tiling that the plan shares
// with their kernels. No device code: the host planning includes it.
#pragma once

#include <cuda_runtime.h>

#include "cross_entropy.h"

// threads of a streaming row block (at most), and of the count and loss blocks
constexpr int kMaxThreads = 1024;
// threads of a resident CTA
constexpr int kResidentThreads = 256;
// Bytes of a row one resident CTA holds: up to 64 KB keeps 3 CTAs (rows) an SM in flight;
// longer rows are split over a cluster of up to kMaxCluster CTAs (portable cluster size).
constexpr int kSliceTarget = 64 * 1024;
constexpr int kMaxCluster = 8;
constexpr int kSliceMax = 200 * 1024;

namespace ce_job {

// The non-ignored targets of a mean (cross_entropy_count.cu).
cudaError_t count(const CrossEntropyParams &p, cudaStream_t stream);
// The loss and dlogits of every row, T the logits' dtype, kCap: softcap on. Rows held in
// shared memory, read once (cross_entropy_resident.cu; cudaErrorNotSupported where the
// device refuses it), or streamed twice by one block a row (cross_entropy_rows.cu).
template <typename T, bool kCap>
cudaError_t resident(const CrossEntropyParams &p, const CrossEntropyPlan &plan,
                     cudaStream_t stream);
template <typename T, bool kCap>
cudaError_t rows(const CrossEntropyParams &p, const CrossEntropyPlan &plan, cudaStream_t stream);
// The loss of a mean or sum from the per-token losses (cross_entropy_loss.cu).
cudaError_t loss(const CrossEntropyParams &p, cudaStream_t stream);

}  // namespace ce_job
