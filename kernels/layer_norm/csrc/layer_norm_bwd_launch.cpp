// LayerNorm backward: a plan's kernels, for the run-time dtypes of x and gamma (host code
// only; the kernels' .cu files instantiate every combination this reaches).

#include "../../common/csrc/static_switch.h"
#include "layer_norm_bwd.h"
#include "layer_norm_bwd_launchers.h"

namespace {

template <typename T, typename W, bool kAffine, bool kPartials>
cudaError_t launch_rows(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  return plan.piped ? ln_bwd::piped<T, W, kAffine, kPartials>(p, plan, s)
                    : ln_bwd::rows<T, W, kAffine, kPartials>(p, plan, s);
}

// gamma: fp32 or x's dtype; the column sums only with gamma
template <typename T>
cudaError_t launch_typed(const LnBwdParams &p, const LnBwdPlan &plan, cudaStream_t s) {
  if (!p.affine) return launch_rows<T, float, false, false>(p, plan, s);
  return BOOL_SWITCH(p.ws != nullptr, kPartials, [&] {
    if (p.w_dtype == DType::kFloat32) return launch_rows<T, float, true, kPartials>(p, plan, s);
    if (p.w_dtype != p.x_dtype) return cudaErrorInvalidValue;
    return launch_rows<T, T, true, kPartials>(p, plan, s);
  });
}

}  // namespace

cudaError_t layer_norm_bwd_launch(const LnBwdParams &p, const LnBwdPlan &plan,
                                  cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  if (p.ws && !p.affine) return cudaErrorInvalidValue;
  const cudaError_t err =
      DTYPE_SWITCH(p.x_dtype, T, [&] { return launch_typed<T>(p, plan, stream); });
  if (err != cudaSuccess || !p.ws) return err;
  return DTYPE_SWITCH(p.w_dtype, W, [&] { return ln_bwd::cols<W>(p, plan.parts, stream); });
}
