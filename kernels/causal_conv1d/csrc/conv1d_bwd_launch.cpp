// Causal conv1d backward: a plan's kernels, for the run-time dtypes and width (host code
// only; the kernels' .cu files instantiate every pair this reaches).

#include "../../common/csrc/static_switch.h"
#include "conv1d_bwd.h"
#include "conv1d_bwd_launchers.h"

cudaError_t conv1d_bwd_launch(const ConvBwdParams &p, const ConvBwdPlan &plan,
                              cudaStream_t stream) {
  const cudaError_t err = DTYPE_SWITCH(p.x_dtype, T, [&] {
    return INT_SWITCH(p.width, K, (2, 3, 4), [&] {
      cudaError_t e = plan.channel_first ? conv1d_bwd::channel_first<T, K>(p, plan, stream)
                                         : conv1d_bwd::channel_last<T, K>(p, plan, stream);
      if (e == cudaSuccess && p.want_dinit) e = conv1d_bwd::dinit<T, K>(p, stream);
      return e;
    });
  });
  if (err != cudaSuccess) return err;
  return DTYPE_SWITCH(p.w_dtype, W, [&] { return conv1d_bwd::reduce<W>(p, plan.parts, stream); });
}
