// A = act(x) on the input, recomputed for the wgrad GEMM where the forward did not save it:
// one pass over x in fp32, one rounding at the store (as the forward rounded it).
#include "linear_bwd_act.cuh"

namespace linear_bwd {
namespace {

template <typename T, int kAct, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    act_kernel(Strided out, Strided in, int64_t rows, int64_t cols) {
  map_walk<T, kPacked>(out, rows, cols, [](float x) { return act_f<kAct>(x); }, in);
}

}  // namespace

template <typename T, int kAct>
cudaError_t launch_act(Strided out, Strided in, int64_t rows, int64_t cols,
                       cudaStream_t stream) {
  return launch_walk<T>(out, {in}, rows, cols, [&](auto packed, dim3 grid) {
    act_kernel<T, kAct, decltype(packed)::value><<<grid, kThreads, 0, stream>>>(out, in, rows,
                                                                               cols);
  });
}

#define LINEAR_ACT(T, A) \
  template cudaError_t launch_act<T, A>(Strided, Strided, int64_t, int64_t, cudaStream_t);
#define LINEAR_ACT_ACTS(T) LINEAR_ACT(T, 1) LINEAR_ACT(T, 2) LINEAR_ACT(T, 3) LINEAR_ACT(T, 4)
LINEAR_ACT_ACTS(float)
LINEAR_ACT_ACTS(__half)
LINEAR_ACT_ACTS(__nv_bfloat16)

}  // namespace linear_bwd
