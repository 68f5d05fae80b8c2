// A = act(x) on the input, recomputed for the wgrad GEMM where the forward did not save it:
// one pass over x in fp32, one rounding at the store (as the forward rounded it).
#include "linear_bwd_act.cuh"

namespace linear_bwd {
namespace {

template <typename T, int kAct, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    act_kernel(Strided out, Strided in, int64_t rows, int64_t cols) {
  if constexpr (kPacked) {
    for_each_pack<T>(out, rows, cols, [&](int64_t i, int64_t j) {
      const Pack<T> x = *reinterpret_cast<const Pack<T> *>(at<const T>(in, i, j));
      Pack<T> a;
#pragma unroll
      for (int v = 0; v < kPackBytes / int(sizeof(T)); ++v)
        a.v[v] = from_f<T>(act_f<kAct>(to_f(x.v[v])));
      *reinterpret_cast<Pack<T> *>(at<T>(out, i, j)) = a;
    });
  } else {
    for_each_element(out, rows, cols, [&](int64_t i, int64_t j) {
      *at<T>(out, i, j) = from_f<T>(act_f<kAct>(to_f(*at<const T>(in, i, j))));
    });
  }
}

}  // namespace

template <typename T, int kAct>
cudaError_t launch_act(Strided out, Strided in, int64_t rows, int64_t cols,
                       cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  if (packed_walk(out, {in}, rows, cols, sizeof(T)))
    act_kernel<T, kAct, true><<<grid_for(out, rows, cols, kPackBytes / sizeof(T)), kThreads, 0,
                                stream>>>(out, in, rows, cols);
  else
    act_kernel<T, kAct, false><<<grid_for(out, rows, cols), kThreads, 0, stream>>>(out, in, rows,
                                                                                   cols);
  return cudaGetLastError();
}

#define LINEAR_ACT(T, A) \
  template cudaError_t launch_act<T, A>(Strided, Strided, int64_t, int64_t, cudaStream_t);
#define LINEAR_ACT_ACTS(T) LINEAR_ACT(T, 1) LINEAR_ACT(T, 2) LINEAR_ACT(T, 3) LINEAR_ACT(T, 4)
LINEAR_ACT_ACTS(float)
LINEAR_ACT_ACTS(__half)
LINEAR_ACT_ACTS(__nv_bfloat16)

}  // namespace linear_bwd
