// dZ = dY act'(Z) after the GEMM: the derivative no cuBLASLt epilogue can take (it applies
// to both GEMMs' input), one pass over dY and Z in fp32, one rounding at the store.
#include "linear_bwd_act.cuh"

namespace linear_bwd {
namespace {

template <typename T, int kAct, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    dact_kernel(Strided out, Strided in, Strided grad, int64_t rows, int64_t cols) {
  map_walk<T, kPacked>(out, rows, cols, [](float z, float g) { return g * dact_f<kAct>(z); },
                       in, grad);
}

}  // namespace

template <typename T, int kAct>
cudaError_t launch_dact(Strided out, Strided in, Strided grad, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  return launch_walk<T>(out, {in, grad}, rows, cols, [&](auto packed, dim3 grid) {
    dact_kernel<T, kAct, decltype(packed)::value><<<grid, kThreads, 0, stream>>>(
        out, in, grad, rows, cols);
  });
}

#define LINEAR_DACT(T, A)                                                                 \
  template cudaError_t launch_dact<T, A>(Strided, Strided, Strided, int64_t, int64_t,     \
                                         cudaStream_t);
#define LINEAR_DACT_ACTS(T) LINEAR_DACT(T, 1) LINEAR_DACT(T, 2) LINEAR_DACT(T, 3) LINEAR_DACT(T, 4)
LINEAR_DACT_ACTS(float)
LINEAR_DACT_ACTS(__half)
LINEAR_DACT_ACTS(__nv_bfloat16)

}  // namespace linear_bwd
