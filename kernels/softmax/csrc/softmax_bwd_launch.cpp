// Softmax backward: a plan's kernel, for the run-time dtype (host code only; the kernels'
// .cu files instantiate every combination this reaches).

#include "../../common/csrc/static_switch.h"
#include "softmax_bwd.h"
#include "softmax_bwd_launchers.h"

namespace {

template <typename T>
cudaError_t launch_rows(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan, cudaStream_t s) {
  if (plan.split) return sm_bwd::split<T>(p, plan, s);
  if (plan.warp_per_row) {
    return INT_SWITCH(plan.chunks, C, (1, 2, 4, 8), [&] {
      return sm_bwd::rows<T, C, true, false>(p, plan, s);
    });
  }
  if (plan.streamed) {
    if (plan.chunks != kMaxChunks) return cudaErrorInvalidValue;
    return sm_bwd::rows<T, kMaxChunks, false, true>(p, plan, s);
  }
  // C = 2 block rows are split rows (above)
  return INT_SWITCH(plan.chunks, C, (1, 4, 8), [&] {
    return sm_bwd::rows<T, C, false, false>(p, plan, s);
  });
}

}  // namespace

cudaError_t softmax_bwd_launch(const SoftmaxBwdParams &p, const SoftmaxBwdPlan &plan,
                               cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  return DTYPE_SWITCH(p.dtype, T, [&] { return launch_rows<T>(p, plan, stream); });
}
