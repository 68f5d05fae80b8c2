// Cross entropy forward and backward: a plan's kernels, for the run-time dtype and softcap
// (host code only; the kernels' .cu files instantiate every combination this reaches).

#include "../../common/csrc/static_switch.h"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"

cudaError_t cross_entropy_launch(const CrossEntropyParams &p, const CrossEntropyPlan &plan,
                                 cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (plan.count) {
    const cudaError_t err = ce_job::count(p, stream);
    if (err != cudaSuccess) return err;
  }
  const cudaError_t err = DTYPE_SWITCH(p.dtype, T, [&] {
    return BOOL_SWITCH(p.softcap > 0.f, kCap, [&] {
      cudaError_t e = cudaErrorNotSupported;
      if (plan.resident) e = ce_job::resident<T, kCap>(p, plan, stream);
      if (e == cudaErrorNotSupported) e = ce_job::rows<T, kCap>(p, plan, stream);
      return e;
    });
  });
  if (err != cudaSuccess || !plan.loss) return err;
  return ce_job::loss(p, stream);
}
