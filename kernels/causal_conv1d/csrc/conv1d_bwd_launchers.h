// The jobs of the causal conv1d backward, one .cu each, as the host launch code calls them
// (each .cu ends with the instantiations it compiles), and the tiling that the plan shares
// with their kernels. No device code: the host planning includes it.
#pragma once

#include <cuda_runtime.h>

#include "conv1d_bwd.h"

// channel-first: a warp scans a row in tiles of 32 lanes x 16 bytes, 4 warps a block
constexpr int kRowWarps = 4;
// channel-last: a thread owns 4 consecutive channels (8-byte (16-bit) or 16-byte (fp32)
// accesses), 32 threads of a warp side by side along channels, and the 4 warps of a block
// scan consecutive time segments
constexpr int kChannelsPerThread = 4;
constexpr int kLanesC = 32;
constexpr int kSegments = 4;

namespace conv1d_bwd {

// dx and the dweight/dbias partials of x time-contiguous (conv1d_bwd_channel_first.cu) or
// channel-contiguous (conv1d_bwd_channel_last.cu): T the dtype of x, K the width.
template <typename T, int K>
cudaError_t channel_first(const ConvBwdParams &p, const ConvBwdPlan &plan, cudaStream_t stream);
template <typename T, int K>
cudaError_t channel_last(const ConvBwdParams &p, const ConvBwdPlan &plan, cudaStream_t stream);
// dinitial_states (conv1d_bwd_dinit.cu).
template <typename T, int K>
cudaError_t dinit(const ConvBwdParams &p, cudaStream_t stream);
// dweight and dbias from the workspace's `parts` rows, in a fixed order
// (conv1d_bwd_reduce.cu): W the dtype of the weights.
template <typename W>
cudaError_t reduce(const ConvBwdParams &p, int parts, cudaStream_t stream);

}  // namespace conv1d_bwd
