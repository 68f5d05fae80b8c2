// dZ = dY act'(Z) after the GEMM: the derivative no cuBLASLt epilogue can take (it applies
// to both GEMMs' input), one pass over dY and Z in fp32, one rounding at the store.
#include "linear_bwd_act.cuh"

namespace linear_bwd {
namespace {

template <typename T, int kAct, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    dact_kernel(Strided out, Strided in, Strided grad, int64_t rows, int64_t cols) {
  if constexpr (kPacked) {
    for_each_pack<T>(out, rows, cols, [&](int64_t i, int64_t j) {
      const Pack<T> z = *reinterpret_cast<const Pack<T> *>(at<const T>(in, i, j));
      const Pack<T> g = *reinterpret_cast<const Pack<T> *>(at<const T>(grad, i, j));
      Pack<T> d;
#pragma unroll
      for (int v = 0; v < kPackBytes / int(sizeof(T)); ++v)
        d.v[v] = from_f<T>(to_f(g.v[v]) * dact_f<kAct>(to_f(z.v[v])));
      *reinterpret_cast<Pack<T> *>(at<T>(out, i, j)) = d;
    });
  } else {
    for_each_element(out, rows, cols, [&](int64_t i, int64_t j) {
      const float z = to_f(*at<const T>(in, i, j));
      const float g = to_f(*at<const T>(grad, i, j));
      *at<T>(out, i, j) = from_f<T>(g * dact_f<kAct>(z));
    });
  }
}

}  // namespace

template <typename T, int kAct>
cudaError_t launch_dact(Strided out, Strided in, Strided grad, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  if (packed_walk(out, {in, grad}, rows, cols, sizeof(T)))
    dact_kernel<T, kAct, true><<<grid_for(out, rows, cols, kPackBytes / sizeof(T)), kThreads, 0,
                                 stream>>>(out, in, grad, rows, cols);
  else
    dact_kernel<T, kAct, false><<<grid_for(out, rows, cols), kThreads, 0, stream>>>(
        out, in, grad, rows, cols);
  return cudaGetLastError();
}

#define LINEAR_DACT(T, A)                                                                 \
  template cudaError_t launch_dact<T, A>(Strided, Strided, Strided, int64_t, int64_t,     \
                                         cudaStream_t);
#define LINEAR_DACT_ACTS(T) LINEAR_DACT(T, 1) LINEAR_DACT(T, 2) LINEAR_DACT(T, 3) LINEAR_DACT(T, 4)
LINEAR_DACT_ACTS(float)
LINEAR_DACT_ACTS(__half)
LINEAR_DACT_ACTS(__nv_bfloat16)

}  // namespace linear_bwd
