// Programmatic dependent launches (sm_90): a second kernel launched so that its launch (and
// its blocks' prologue) overlaps the end of the kernel before it in the stream, instead of
// starting only after that kernel has drained. The dependent calls wait_for_primary()
// before it reads anything the primary wrote; the primary may call allow_dependents() to
// release the launch before its blocks exit (it is released at their exit otherwise).
#pragma once

#include <cuda_runtime.h>

#include <utility>

// In the dependent: returns once the kernels before it in the stream have completed and
// their writes are visible. A no-op when the kernel was launched plainly.
__device__ __forceinline__ void wait_for_primary() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// In the primary: this block no longer holds back the dependent's launch.
__device__ __forceinline__ void allow_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// kernel<<<grid, block, 0, stream>>>(args...) as a programmatic dependent of the work
// before it in the stream.
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block,
                             cudaStream_t stream, Args &&...args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
