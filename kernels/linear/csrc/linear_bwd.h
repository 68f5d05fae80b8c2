// The linear backward through cuBLASLt: the problem, and the plan of GEMMs (with their
// epilogues) and elementwise jobs that computes it. No torch, cuBLAS or CUDA types here,
// so that the plan runs and is checked on a machine without them
// (tests/linear/test_cublaslt_plan.py).
//
// Every matrix is described as the row-major product the op states (x (M, K), w (N, K),
// dy (M, N), ...), each stored row-major or as the transpose of a contiguous tensor
// (column-major), with its leading dimension. cuBLAS multiplies column-major matrices: a
// row-major C = P Q is computed as the column-major Cᵀ = Qᵀ Pᵀ, which the plan spells out
// (which tensor is cuBLAS's A and B, their transposes, m, n, k, the leading dimensions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace linear_bwd {

enum class Act : int { kNone = 0, kRelu = 1, kGelu = 2, kGeluTanh = 3, kSilu = 4 };
enum class ActAt : int { kOutput = 0, kInput = 1 };

// cuBLASLt's cublasLtEpilogue_t values (cublasLt.h), repeated so that the plan needs no
// cuBLAS header; linear_bwd_launch.cpp checks them against the real ones at compile time.
enum class Epilogue : uint32_t {
  kDefault = 1,
  kBias = 4,
  kReluAux = 130,
  kDRelu = 136,
  kDGelu = 192,
  kBGradA = 256,
  kBGradB = 512,
};

// The tensors a plan names. kZr, kAr (a recomputed Z or act(x)), kDz (dZ = dY act'(Z))
// are temporaries the caller allocates as the plan says; kAux is the saved epilogue input
// a preparation builds (the pre-GELU x at a padded leading dimension, or a ReLU bitmask);
// kIdent and kScratch are that preparation's identity matrix and throwaway output.
enum class Tensor : int {
  kX = 0, kW, kDy, kZ, kA, kBias, kDx, kDw, kDb, kDz, kZr, kAr, kAux, kIdent, kScratch,
  kNone = -1,
};

// A row-major (rows x cols) matrix of the op's, as it lies in memory: row-major with
// element (i, j) at i * ld + j, or column-major at i + j * ld.
struct Matrix {
  Tensor tensor = Tensor::kNone;
  int64_t rows = 0, cols = 0;
  bool col_major = false;
  int64_t ld = 0;
  // element (i, j) at i * row_stride() + j * col_stride()
  int64_t row_stride() const { return col_major ? 1 : ld; }
  int64_t col_stride() const { return col_major ? ld : 1; }
};

#ifdef __CUDACC__
#define LINEAR_BWD_HD __host__ __device__ __forceinline__
#else
#define LINEAR_BWD_HD inline
#endif

// Whether the elementwise jobs walk a rows x cols output column by column (threads along a
// column): where it is column-major, its row stride the smaller, so that consecutive threads
// touch consecutive addresses. Walking a row-major matrix column by column strides every
// access by a row: an H100 ran dact at 0.2 TB/s that way.
LINEAR_BWD_HD bool walks_columns(int64_t row_stride, int64_t col_stride, int64_t cols) {
  return row_stride < col_stride || cols == 1;
}

struct Problem {
  int64_t m = 0, n = 0, k = 0;
  Act act = Act::kNone;
  ActAt act_at = ActAt::kOutput;
  bool bias = false;       // db wanted (and, for a recomputed Z, the bias read)
  bool recompute = false;  // Z (output) or act(x) (input) recomputed, not read
  // storage of x (and a, dx), w (and dw), dy (and z): column-major when true
  bool x_t = false, w_t = false, dy_t = false;
  int elem_bytes = 2;  // the case dtype's size (the aux ld of a 16-bit GELU input)
};

// One cublasLtMatmul: D (m x n) = op(A) (m x k) op(B) (k x n), column-major, fp32
// compute, alpha 1, beta 0, with an epilogue.
struct Gemm {
  std::string name;  // "recompute_z", "dgrad", "wgrad", "relu_mask"
  Tensor a = Tensor::kNone, b = Tensor::kNone, d = Tensor::kNone;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  Epilogue epilogue = Epilogue::kDefault;
  Tensor aux = Tensor::kNone;  // EPILOGUE_AUX_POINTER
  int64_t aux_ld = 0;          // EPILOGUE_AUX_LD (bits for a ReLU bitmask)
  Tensor bias = Tensor::kNone; // BIAS_POINTER: the bias read (kBias) or db written (kDb)
};

// One elementwise job over a (rows x cols) matrix: out = act(in) (`derivative` false) or
// out = grad act'(in) (`derivative` true).
struct Elementwise {
  std::string name;  // "dact", "act"
  Matrix out, in, grad;
  bool derivative = false;
};

// What the caller allocates: a temporary of the shape and storage given.
struct Temporary {
  Matrix matrix;
};

// The epilogue input a preparation (the forward's part) must leave: `rows` x `cols`
// column-major at `ld` (GELU: elements of the dtype; ReLU: bits), in the orientation of
// the dgrad GEMM's D.
struct AuxLayout {
  bool needed = false;
  bool bitmask = false;
  int64_t rows = 0, cols = 0, ld = 0;
  bool copy_of_x = false;  // GELU: x itself serves where its ld already fits
};

// One step of a plan: a GEMM or an elementwise job.
struct Step {
  bool is_gemm = true;
  Gemm gemm;
  Elementwise elementwise;
};

struct Plan {
  std::string unsupported;  // non-empty: no plan, and why
  std::vector<Temporary> temporaries;
  std::vector<Step> steps;  // in order
  AuxLayout aux;
  std::string derivative;  // where act' is applied: "none", "epilogue", "elementwise"
};

// The backward of `p`.
Plan plan_backward(const Problem &p);
// The GEMM that makes the ReLU bitmask of x (the forward's RELU_AUX): D = I x (or x I)
// into a scratch matrix, the bitmask into kAux at aux.ld bits.
Gemm plan_relu_mask(const Problem &p, const AuxLayout &aux);

const char *epilogue_name(Epilogue e);
const char *tensor_name(Tensor t);
// The matrix (shape, storage, ld) of a tensor of the op's, dense as make_inputs gives it.
Matrix matrix_of(const Problem &p, Tensor t);

}  // namespace linear_bwd
