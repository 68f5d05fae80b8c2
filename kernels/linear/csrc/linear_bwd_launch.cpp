// Runs a plan of linear_bwd_plan.cpp: each GEMM through cublasLtMatmul (fp32 compute, the
// plan's epilogue, aux and bias pointers, the heuristic's first algorithm within the
// workspace), each elementwise job through its kernel. Host code only. Nothing throws:
// every cuBLAS and CUDA call is checked and a failure comes back as a Status naming the
// call (a C++ exception out of our extensions crashed the H200 image's Python:
// docs/cuda-kernels.md#known-problems); a GEMM for which the heuristic has no algorithm is
// kUnsupported with the combination, never a fallback to another epilogue.
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "../../common/csrc/static_switch.h"
#include "linear_bwd.h"
#include "linear_bwd_launch.h"
#include "linear_bwd_launchers.h"

namespace linear_bwd {

static_assert(static_cast<uint32_t>(Epilogue::kDefault) == CUBLASLT_EPILOGUE_DEFAULT, "");
static_assert(static_cast<uint32_t>(Epilogue::kBias) == CUBLASLT_EPILOGUE_BIAS, "");
static_assert(static_cast<uint32_t>(Epilogue::kReluAux) == CUBLASLT_EPILOGUE_RELU_AUX, "");
static_assert(static_cast<uint32_t>(Epilogue::kDRelu) == CUBLASLT_EPILOGUE_DRELU, "");
static_assert(static_cast<uint32_t>(Epilogue::kDGelu) == CUBLASLT_EPILOGUE_DGELU, "");
static_assert(static_cast<uint32_t>(Epilogue::kBGradA) == CUBLASLT_EPILOGUE_BGRADA, "");
static_assert(static_cast<uint32_t>(Epilogue::kBGradB) == CUBLASLT_EPILOGUE_BGRADB, "");

namespace {

std::string blas_error(const char *call, cublasStatus_t s) {
  return std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)) +
         " (" + cublasLtGetStatusName(s) + ": " + cublasLtGetStatusString(s) + ")";
}

std::string cuda_error(const char *call, cudaError_t e) {
  return std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

#define LT_CHECK(call)                                            \
  do {                                                            \
    const cublasStatus_t s_ = (call);                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) return Status::error(blas_error(#call, s_)); \
  } while (0)

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kFloat16: return CUDA_R_16F;
    case DType::kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

const char *dtype_name(DType dt) {
  switch (dt) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    default: return "fp32";
  }
}

// One handle a device, created on first use and kept for the process (cuBLASLt handles
// are meant to be reused; creating one costs milliseconds).
Status handle_for(int device, cublasLtHandle_t *out) {
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(device);
  if (it == handles.end()) {
    cublasLtHandle_t h = nullptr;
    LT_CHECK(cublasLtCreate(&h));
    it = handles.emplace(device, h).first;
  }
  *out = it->second;
  return Status::ok();
}

// Destroys what a GEMM created, whichever way it returns.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <typename V>
cublasStatus_t set(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, V value) {
  return cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof(value));
}

std::string describe(const Gemm &g, DType dt) {
  return g.name + " (" + epilogue_name(g.epilogue) + ", " + dtype_name(dt) + ", m " +
         std::to_string(g.m) + " n " + std::to_string(g.n) + " k " + std::to_string(g.k) +
         ", A " + (g.trans_a ? "T" : "N") + " lda " + std::to_string(g.lda) + ", B " +
         (g.trans_b ? "T" : "N") + " ldb " + std::to_string(g.ldb) + ", ldd " +
         std::to_string(g.ldd) +
         (g.aux != Tensor::kNone ? ", aux ld " + std::to_string(g.aux_ld) : std::string()) +
         ")";
}

// The largest power of two up to 256 that divides the address: what the heuristic may
// assume of a pointer (its default assumes 256 bytes).
uint32_t alignment_of(const void *p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al) al /= 2;
  return al;
}

template <typename V>
Status algo_config(const cublasLtMatmulAlgo_t &algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                   const char *what, V *out) {
  size_t written = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, out, sizeof(*out), &written);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::error(blas_error("cublasLtMatmulAlgoConfigGetAttribute", s) + " (" + what +
                         ")");
  return Status::ok();
}

// What the GEMM ran, as facts: its epilogue and the algorithm the heuristic gave.
Status record(const Gemm &g, const cublasLtMatmulHeuristicResult_t &r, Status *facts) {
  int32_t id = 0, splitk = 1;
  uint32_t tile = 0, stages = 0, reduction = 0;
  Status s = algo_config(r.algo, CUBLASLT_ALGO_CONFIG_ID, "id", &id);
  if (s.code == Status::kOk) s = algo_config(r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, "tile", &tile);
  if (s.code == Status::kOk)
    s = algo_config(r.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages", &stages);
  if (s.code == Status::kOk)
    s = algo_config(r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "split-K", &splitk);
  if (s.code == Status::kOk)
    s = algo_config(r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction", &reduction);
  if (s.code != Status::kOk) return s;
  facts->fact(g.name + "_epilogue", epilogue_name(g.epilogue));
  facts->fact(g.name + "_algo", std::to_string(id));
  facts->fact(g.name + "_tile", std::to_string(tile));
  facts->fact(g.name + "_stages", std::to_string(stages));
  facts->fact(g.name + "_split_k", std::to_string(splitk));
  facts->fact(g.name + "_reduction_scheme", std::to_string(reduction));
  facts->fact(g.name + "_workspace_bytes", std::to_string(r.workspaceSize));
  return Status::ok();
}

Status run_gemm(const Gemm &g, const Buffers &buf, DType dt, cublasLtHandle_t handle,
                Status *facts, cudaStream_t stream) {
  const void *a = buf.ptr[static_cast<int>(g.a)], *b = buf.ptr[static_cast<int>(g.b)];
  void *d = buf.ptr[static_cast<int>(g.d)];
  if (!a || !b || !d) return Status::error(describe(g, dt) + ": an operand was not given");
  const cudaDataType_t type = cuda_type(dt);
  Descriptors desc;
  LT_CHECK(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t trans_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t trans_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_CHECK(set<int32_t>(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, trans_a));
  LT_CHECK(set<int32_t>(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, trans_b));
  LT_CHECK(set<uint32_t>(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                         static_cast<uint32_t>(g.epilogue)));
  if (g.bias != Tensor::kNone) {
    void *bias = buf.ptr[static_cast<int>(g.bias)];
    if (!bias) return Status::error(describe(g, dt) + ": the bias vector was not given");
    LT_CHECK(set<void *>(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
    LT_CHECK(set<int32_t>(desc.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type));
  }
  if (g.aux != Tensor::kNone) {
    void *aux = buf.ptr[static_cast<int>(g.aux)];
    if (!aux) return Status::error(describe(g, dt) + ": the epilogue's aux was not given");
    LT_CHECK(set<void *>(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux));
    LT_CHECK(set<int64_t>(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld));
  }
  LT_CHECK(cublasLtMatrixLayoutCreate(&desc.a, type, g.trans_a ? g.k : g.m,
                                      g.trans_a ? g.m : g.k, g.lda));
  LT_CHECK(cublasLtMatrixLayoutCreate(&desc.b, type, g.trans_b ? g.n : g.k,
                                      g.trans_b ? g.k : g.n, g.ldb));
  LT_CHECK(cublasLtMatrixLayoutCreate(&desc.d, type, g.m, g.n, g.ldd));
  LT_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref));
  const uint64_t ws = buf.workspace_bytes;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t align_a = alignment_of(a), align_b = alignment_of(b), align_d = alignment_of(d);
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(
      handle, desc.op, desc.a, desc.b, desc.d, desc.d, desc.pref, 1, &result, &found);
  if (h == CUBLAS_STATUS_NOT_SUPPORTED || (h == CUBLAS_STATUS_SUCCESS && found == 0))
    return Status::unsupported("cuBLASLt's heuristic has no algorithm for " + describe(g, dt));
  if (h != CUBLAS_STATUS_SUCCESS)
    return Status::error(blas_error("cublasLtMatmulAlgoGetHeuristic", h) + " for " +
                         describe(g, dt));
  Status s = record(g, result, facts);
  if (s.code != Status::kOk) return s;
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t m =
      cublasLtMatmul(handle, desc.op, &alpha, a, desc.a, b, desc.b, &beta, d, desc.d, d,
                     desc.d, &result.algo, buf.workspace, buf.workspace_bytes, stream);
  if (m != CUBLAS_STATUS_SUCCESS)
    return Status::error(blas_error("cublasLtMatmul", m) + " for " + describe(g, dt));
  return Status::ok();
}

Strided strided(const Matrix &mat, const Buffers &buf) {
  Strided s;
  s.ptr = buf.ptr[static_cast<int>(mat.tensor)];
  s.row_stride = mat.row_stride();
  s.col_stride = mat.col_stride();
  return s;
}

Status run_elementwise(const Elementwise &e, const Problem &p, const Buffers &buf, DType dt,
                       cudaStream_t stream) {
  const Strided out = strided(e.out, buf), in = strided(e.in, buf);
  if (!out.ptr || !in.ptr) return Status::error(e.name + ": a tensor was not given");
  const int act = static_cast<int>(p.act);
  cudaError_t err;
  if (e.derivative) {
    const Strided grad = strided(e.grad, buf);
    if (!grad.ptr) return Status::error(e.name + ": the gradient was not given");
    err = DTYPE_SWITCH(dt, T, [&] {
      return INT_SWITCH(act, kAct, (1, 2, 3, 4), [&] {
        return launch_dact<T, kAct>(out, in, grad, e.out.rows, e.out.cols, stream);
      });
    });
    if (err != cudaSuccess) return Status::error(cuda_error("launch_dact", err));
  } else {
    err = DTYPE_SWITCH(dt, T, [&] {
      return INT_SWITCH(act, kAct, (1, 2, 3, 4), [&] {
        return launch_act<T, kAct>(out, in, e.out.rows, e.out.cols, stream);
      });
    });
    if (err != cudaSuccess) return Status::error(cuda_error("launch_act", err));
  }
  return Status::ok();
}

// Which walk an elementwise job took (packed_walk): what its speed depends on.
std::string elementwise_fact(const Elementwise &e, const Buffers &buf, DType dt) {
  const Strided out = strided(e.out, buf), in = strided(e.in, buf);
  const bool packed = e.derivative
      ? packed_walk(out, {in, strided(e.grad, buf)}, e.out.rows, e.out.cols, elem_size(dt))
      : packed_walk(out, {in}, e.out.rows, e.out.cols, elem_size(dt));
  return packed ? "elementwise kernel, 16-byte packs" : "elementwise kernel, scalar";
}

}  // namespace

Status run_plan(const Problem &p, const Plan &plan, const Buffers &buf, DType dt, int device,
                cudaStream_t stream) {
  if (!plan.unsupported.empty()) return Status::unsupported(plan.unsupported);
  cublasLtHandle_t handle = nullptr;
  Status facts = handle_for(device, &handle);
  if (facts.code != Status::kOk) return facts;
  facts.fact("derivative", plan.derivative);
  for (const Step &step : plan.steps) {
    const Status s = step.is_gemm ? run_gemm(step.gemm, buf, dt, handle, &facts, stream)
                                  : run_elementwise(step.elementwise, p, buf, dt, stream);
    if (s.code != Status::kOk) return s;
    if (!step.is_gemm) facts.fact(step.elementwise.name, elementwise_fact(step.elementwise,
                                                                         buf, dt));
  }
  return facts;
}

Status run_relu_mask(const Problem &p, const AuxLayout &aux, const Buffers &buf, DType dt,
                     int device, cudaStream_t stream) {
  cublasLtHandle_t handle = nullptr;
  Status facts = handle_for(device, &handle);
  if (facts.code != Status::kOk) return facts;
  const Status s = run_gemm(plan_relu_mask(p, aux), buf, dt, handle, &facts, stream);
  return s.code == Status::kOk ? facts : s;
}

}  // namespace linear_bwd
