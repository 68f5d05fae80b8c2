// The elementwise jobs of the linear backward (the GEMMs are cuBLASLt's), one .cu each, as
// the host launch code calls them; each .cu ends with the instantiations it compiles. No
// device code.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"
#include "linear_bwd.h"

namespace linear_bwd {

// A (rows x cols) matrix in memory: element (i, j) at i * row_stride + j * col_stride.
struct Strided {
  void *ptr = nullptr;
  int64_t row_stride = 0, col_stride = 0;
};

constexpr int kThreads = 256;    // threads a block of the elementwise jobs
constexpr int kMaxBlocks = 65535 * 8;  // grid-stride beyond
constexpr int kMaxGridY = 65535;       // the grid's y limit (blocks along the outer dimension)

constexpr int kPackBytes = 16;  // one 128-bit load or store a thread on the packed walk

// Whether the elementwise walk over a rows x cols `out` may move kPackBytes a thread: every
// operand contiguous along the walk's direction (walks_columns), that dimension a whole
// number of packs, every pack aligned. Scalar 16-bit loads reached a third of the copy
// bandwidth (an H100: 1.0 of 3.05 TB/s).
inline bool packed_walk(const Strided &out, std::initializer_list<Strided> operands,
                        int64_t rows, int64_t cols, int elem_bytes) {
  const int vec = kPackBytes / elem_bytes;
  const bool by_cols = walks_columns(out.row_stride, out.col_stride, cols);
  const int64_t inner = by_cols ? rows : cols;
  if (inner % vec != 0) return false;
  auto fits = [&](const Strided &s) {
    const int64_t along = by_cols ? s.row_stride : s.col_stride;
    const int64_t across = by_cols ? s.col_stride : s.row_stride;
    return along == 1 && across % vec == 0 &&
           reinterpret_cast<uintptr_t>(s.ptr) % kPackBytes == 0;
  };
  if (!fits(out)) return false;
  for (const Strided &s : operands)
    if (!fits(s)) return false;
  return true;
}

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
