// Host-only check of kernels/common/csrc/dtype_dispatch.cuh (no device is touched): every
// DType reaches its C++ type, anything else is refused. Exit status 0 when all hold.
#include <cstdio>
#include <type_traits>

#include "../../kernels/common/csrc/dtype_dispatch.cuh"

template <typename Want>
static bool maps_to(DType dt) {
  return with_dtype(dt, [](auto t) {
           return std::is_same<typename decltype(t)::type, Want>::value ? cudaSuccess
                                                                        : cudaErrorUnknown;
         }) == cudaSuccess;
}

int main() {
  const bool ok = maps_to<float>(DType::kFloat32) && maps_to<__half>(DType::kFloat16) &&
                  maps_to<__nv_bfloat16>(DType::kBFloat16) &&
                  with_dtype(static_cast<DType>(7), [](auto) { return cudaSuccess; }) ==
                      cudaErrorInvalidValue;
  std::printf("%s\n", ok ? "ok" : "wrong mapping");
  return ok ? 0 : 1;
}
