// Causal conv1d backward: dinitial_states, one thread per (batch, channel). The K-1 state
// slots feed outputs 0 .. K-2 only, so their g' is recomputed here instead of carried
// through the main scan.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "conv1d_bwd_kernels.cuh"
#include "conv1d_bwd_launchers.h"

namespace {

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

}  // namespace

template <typename T, int K>
cudaError_t conv1d_bwd::dinit(const ConvBwdParams &p, cudaStream_t stream) {
  const int64_t n = int64_t(p.batch) * p.dim;
  conv1d_bwd_dinit<T, K><<<unsigned((n + 127) / 128), 128, 0, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t conv1d_bwd::dinit<float, 2>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<float, 3>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<float, 4>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<__half, 2>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<__half, 3>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<__half, 4>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<__nv_bfloat16, 2>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<__nv_bfloat16, 3>(const ConvBwdParams &, cudaStream_t);
template cudaError_t conv1d_bwd::dinit<__nv_bfloat16, 4>(const ConvBwdParams &, cudaStream_t);
