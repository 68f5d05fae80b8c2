// The AdamW step: the kernel of the run-time dtypes and features (host code only;
// adamw_step.cu instantiates every combination this reaches).

#include <type_traits>

#include "../../common/csrc/static_switch.h"
#include "adamw.h"
#include "adamw_launchers.h"

namespace {

template <typename P_, typename G_, bool kMaster_, bool kAms_>
struct Kernel {
  using P = P_;
  using G = G_;
  static constexpr bool kMaster = kMaster_, kAms = kAms_;
};

// f(Kernel<P, G, kMaster, kAms>{}) for p's dtypes and features.
template <typename F>
cudaError_t with_kernel(const AdamwParams &p, F &&f) {
  return DTYPE_SWITCH(p.param_dtype, P, [&] {
    return BOOL_SWITCH(p.grad_dtype == DType::kFloat32, kG32, [&] {
      using G = std::conditional_t<kG32, float, P>;
      if (!kG32 && p.grad_dtype != p.param_dtype) return cudaErrorInvalidValue;
      return BOOL_SWITCH(p.master, kMaster, [&] {
        return BOOL_SWITCH(p.amsgrad, kAms, [&] { return f(Kernel<P, G, kMaster, kAms>{}); });
      });
    });
  });
}

}  // namespace

int adamw_max_grid(const AdamwParams &p) {
  int grid = 0;
  const cudaError_t err = with_kernel(p, [&](auto k) {
    using K = decltype(k);
    return adamw_job::max_grid<typename K::P, typename K::G, K::kMaster, K::kAms>(&grid);
  });
  return err == cudaSuccess ? grid : -int(err);
}

cudaError_t adamw_launch(const AdamwParams &p, const AdamwPlan &plan, cudaStream_t stream) {
  if (p.steps < 1 || p.steps > kAdamwMaxSteps) return cudaErrorInvalidValue;
  if (plan.grid.x < 1) return cudaErrorLaunchOutOfResources;
  return with_kernel(p, [&](auto k) {
    using K = decltype(k);
    return adamw_job::step<typename K::P, typename K::G, K::kMaster, K::kAms>(p, plan, stream);
  });
}
