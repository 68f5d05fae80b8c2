// The elementwise jobs of the linear backward (the GEMMs are cuBLASLt's), one .cu each, as
// the host launch code calls them; each .cu ends with the instantiations it compiles. No
// device code.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"

namespace linear_bwd {

// A (rows x cols) matrix in memory: element (i, j) at i * row_stride + j * col_stride.
struct Strided {
  void *ptr = nullptr;
  int64_t row_stride = 0, col_stride = 0;
};

constexpr int kThreads = 256;    // threads a block of the elementwise jobs
constexpr int kMaxBlocks = 65535 * 8;  // grid-stride beyond
constexpr int kMaxGridY = 65535;       // the grid's y limit (blocks along the outer dimension)

// out = grad act'(in) (linear_bwd_dact.cu): dZ from dY and Z after the GEMM. kAct: the
// linear_bwd::Act value; every tensor of dtype T, computed in fp32, rounded once.
template <typename T, int kAct>
cudaError_t launch_dact(Strided out, Strided in, Strided grad, int64_t rows, int64_t cols,
                        cudaStream_t stream);

// out = act(in) (linear_bwd_act.cu): a recomputed act(x) for the wgrad GEMM.
template <typename T, int kAct>
cudaError_t launch_act(Strided out, Strided in, int64_t rows, int64_t cols,
                       cudaStream_t stream);

}  // namespace linear_bwd
