// Host-only check of kernels/common/csrc/static_switch.h (no device is touched): every
// DType reaches its C++ type, each bool and listed int its constant, anything else is
// refused. Prints "ok" and exits 0 when all hold.
#include <cstdio>
#include <type_traits>

#include "../../../kernels/common/csrc/static_switch.h"

template <typename Want>
static bool maps_to(DType dt) {
  return DTYPE_SWITCH(dt, T, [&] {
           return std::is_same<T, Want>::value ? cudaSuccess : cudaErrorUnknown;
         }) == cudaSuccess;
}

static bool bool_is(bool cond) {
  return BOOL_SWITCH(cond, kCond, [&] { return kCond; }) == cond;
}

// v as the switch saw it, or -1 where it was refused
static int int_of(int v) {
  int seen = -1;
  const cudaError_t err = INT_SWITCH(v, kV, (1, 2, 4), [&] {
    static_assert(kV == 1 || kV == 2 || kV == 4, "only the listed values");
    seen = kV;
    return cudaSuccess;
  });
  return err == cudaSuccess ? seen : err == cudaErrorInvalidValue ? -1 : -2;
}

int main() {
  const bool ok = maps_to<float>(DType::kFloat32) && maps_to<__half>(DType::kFloat16) &&
                  maps_to<__nv_bfloat16>(DType::kBFloat16) &&
                  DTYPE_SWITCH(static_cast<DType>(7), T, [&] { return cudaSuccess; }) ==
                      cudaErrorInvalidValue &&
                  bool_is(true) && bool_is(false) && int_of(1) == 1 && int_of(2) == 2 &&
                  int_of(4) == 4 && int_of(3) == -1 && int_of(8) == -1;
  std::printf("%s\n", ok ? "ok" : "wrong mapping");
  return ok ? 0 : 1;
}
