// Which GEMMs, epilogues and elementwise jobs compute the linear backward, and how each
// row-major product maps onto cuBLAS's column-major GEMM. Host code only, no cuBLAS
// header: tests/linear/test_cublaslt_plan.py dumps plans (tests/cuda/csrc/
// linear_plan_dump.cpp) and replays them on the CPU against the float64 golden.
//
// The fusion each position allows (ops/linear.py):
//   output: dZ = dY act'(Z) is an input of both GEMMs, so it is an elementwise job of its
//           own (reading the saved z, or Z recomputed by a GEMM with the BIAS epilogue);
//           dgrad dx = dZ w plain; wgrad dw = dZᵀ x with BGRADA/B giving db = Σ dZ.
//   input:  dgrad dx = (dY w) act'(x) with DGELU (aux: the pre-GELU x) or DRELU (aux: the
//           forward's ReLU bitmask); wgrad dw = dYᵀ a with BGRADA/B giving db = Σ dY; a
//           is the saved act(x), or recomputed by an elementwise job.
// cuBLASLt has no erf-GELU or SiLU derivative epilogue: those are refused on the input
// (the GELU it has is the tanh form).
#include <cstdint>
#include <string>

#include "linear_bwd.h"

namespace linear_bwd {
namespace {

// GELU input: EPILOGUE_AUX_LD divisible by 8 elements; ReLU bitmask: by 128 bits.
constexpr int64_t kGeluAuxAlign = 8;
constexpr int64_t kReluAuxAlign = 128;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

Matrix dense(Tensor t, int64_t rows, int64_t cols, bool col_major) {
  return Matrix{t, rows, cols, col_major, col_major ? rows : cols};
}

// The transpose as a view of the same memory: (cols x rows), the other order, same ld.
Matrix transposed(const Matrix &a) {
  return Matrix{a.tensor, a.cols, a.rows, !a.col_major, a.ld};
}

enum class BiasGrad { kNone, kOfP, kOfQ };

// C (R x S) = P (R x T) Q (T x S), as cuBLAS's column-major D = op(A) op(B). D is C where C
// is column-major, else Cᵀ = Qᵀ Pᵀ. A bias gradient of P (the row sums of P over T,
// length R) or of Q (column sums over T, length S) becomes BGRADA or BGRADB by which of A,
// B the operand landed in.
Gemm product(const std::string &name, const Matrix &c, const Matrix &p, const Matrix &q,
             BiasGrad bgrad) {
  Gemm g;
  g.name = name;
  g.d = c.tensor;
  g.ldd = c.ld;
  g.k = p.cols;
  const Matrix &first = c.col_major ? p : q, &second = c.col_major ? q : p;
  g.m = c.col_major ? c.rows : c.cols;
  g.n = c.col_major ? c.cols : c.rows;
  // column-major D = first' second' where a column-major operand is used as stored (N)
  // and a row-major one as the transpose of its memory (T); with C row-major the operands
  // are the transposes Qᵀ, Pᵀ, which flips that rule.
  g.a = first.tensor;
  g.trans_a = c.col_major ? !first.col_major : first.col_major;
  g.lda = first.ld;
  g.b = second.tensor;
  g.trans_b = c.col_major ? !second.col_major : second.col_major;
  g.ldb = second.ld;
  if (bgrad == BiasGrad::kOfP) {
    g.epilogue = c.col_major ? Epilogue::kBGradA : Epilogue::kBGradB;
  } else if (bgrad == BiasGrad::kOfQ) {
    g.epilogue = c.col_major ? Epilogue::kBGradB : Epilogue::kBGradA;
  }
  if (bgrad != BiasGrad::kNone) g.bias = Tensor::kDb;
  return g;
}

Step gemm_step(const Gemm &g) {
  Step s;
  s.gemm = g;
  return s;
}

Step elementwise_step(const Elementwise &e) {
  Step s;
  s.is_gemm = false;
  s.elementwise = e;
  return s;
}

const char *act_unsupported_on_input(Act act) {
  if (act == Act::kGelu)
    return "cuBLASLt's DGELU epilogue is the tanh form of GELU: it has no derivative of "
           "the erf GELU (approximate = \"none\") to fuse into the dgrad GEMM";
  if (act == Act::kSilu)
    return "cuBLASLt has no SiLU derivative epilogue to fuse into the dgrad GEMM";
  return nullptr;
}

}  // namespace

Matrix matrix_of(const Problem &p, Tensor t) {
  switch (t) {
    case Tensor::kX: case Tensor::kA: case Tensor::kDx: case Tensor::kAr:
      return dense(t, p.m, p.k, p.x_t);
    case Tensor::kW: case Tensor::kDw:
      return dense(t, p.n, p.k, p.w_t);
    case Tensor::kDy: case Tensor::kZ: case Tensor::kDz:
      return dense(t, p.m, p.n, p.dy_t);
    case Tensor::kZr:  // row-major always: the BIAS epilogue adds along D's rows (N)
      return dense(t, p.m, p.n, false);
    default:
      return Matrix{};
  }
}

Plan plan_backward(const Problem &p) {
  Plan plan;
  const bool act = p.act != Act::kNone;
  const Matrix x = matrix_of(p, Tensor::kX), w = matrix_of(p, Tensor::kW),
               dy = matrix_of(p, Tensor::kDy), dx = matrix_of(p, Tensor::kDx),
               dw = matrix_of(p, Tensor::kDw);
  const BiasGrad bgrad = p.bias ? BiasGrad::kOfP : BiasGrad::kNone;  // P = Gᵀ in wgrad
  if (p.act_at == ActAt::kOutput || !act) {
    Matrix g = dy;
    plan.derivative = act ? "elementwise" : "none";
    if (act) {
      Matrix pre = matrix_of(p, Tensor::kZ);
      if (p.recompute) {
        pre = matrix_of(p, Tensor::kZr);
        plan.temporaries.push_back({pre});
        Gemm z = product("recompute_z", pre, x, transposed(w), BiasGrad::kNone);
        if (p.bias) {  // Zr is row-major: D = Zrᵀ, whose rows are the N outputs
          z.epilogue = Epilogue::kBias;
          z.bias = Tensor::kBias;
        }
        plan.steps.push_back(gemm_step(z));
      }
      g = matrix_of(p, Tensor::kDz);
      plan.temporaries.push_back({g});
      plan.steps.push_back(elementwise_step(Elementwise{"dact", g, pre, dy, true}));
    }
    plan.steps.push_back(gemm_step(product("dgrad", dx, g, w, BiasGrad::kNone)));
    plan.steps.push_back(gemm_step(product("wgrad", dw, transposed(g), x, bgrad)));
    return plan;
  }
  if (const char *why = act_unsupported_on_input(p.act)) {
    plan.unsupported = why;
    return plan;
  }
  plan.derivative = "epilogue";
  Gemm dgrad = product("dgrad", dx, dy, w, BiasGrad::kNone);
  const bool relu = p.act == Act::kRelu;
  AuxLayout aux;
  aux.needed = true;
  aux.bitmask = relu;
  aux.rows = dgrad.m;  // the aux has D's orientation; x (like dx) has it already
  aux.cols = dgrad.n;
  aux.ld = round_up(dgrad.m, relu ? kReluAuxAlign : kGeluAuxAlign);
  aux.copy_of_x = !relu && aux.ld == x.ld;
  plan.aux = aux;
  dgrad.epilogue = relu ? Epilogue::kDRelu : Epilogue::kDGelu;
  dgrad.aux = aux.copy_of_x ? Tensor::kX : Tensor::kAux;
  dgrad.aux_ld = aux.ld;
  Matrix acted = matrix_of(p, Tensor::kA);
  if (p.recompute) {
    acted = matrix_of(p, Tensor::kAr);
    plan.temporaries.push_back({acted});
    plan.steps.push_back(elementwise_step(Elementwise{"act", acted, x, Matrix{}, false}));
  }
  plan.steps.push_back(gemm_step(dgrad));
  plan.steps.push_back(gemm_step(product("wgrad", dw, transposed(dy), acted, bgrad)));
  return plan;
}

Gemm plan_relu_mask(const Problem &p, const AuxLayout &aux) {
  // D (aux.rows x aux.cols, column-major, x's memory) = I x_c or x_c I, whichever identity
  // is smaller: D's values are x's exactly (one product by 1 in fp32), and RELU_AUX writes
  // the bit of D > 0 for every element at cuBLASLt's own bit layout.
  const Matrix xc{Tensor::kX, aux.rows, aux.cols, true, matrix_of(p, Tensor::kX).ld};
  const Matrix out{Tensor::kScratch, aux.rows, aux.cols, true, aux.rows};
  Gemm g;
  if (aux.rows <= aux.cols) {
    const Matrix ident{Tensor::kIdent, aux.rows, aux.rows, true, aux.rows};
    g = product("relu_mask", out, ident, xc, BiasGrad::kNone);
  } else {
    const Matrix ident{Tensor::kIdent, aux.cols, aux.cols, true, aux.cols};
    g = product("relu_mask", out, xc, ident, BiasGrad::kNone);
  }
  g.epilogue = Epilogue::kReluAux;
  g.aux = Tensor::kAux;
  g.aux_ld = aux.ld;
  return g;
}

const char *epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kDefault: return "DEFAULT";
    case Epilogue::kBias: return "BIAS";
    case Epilogue::kReluAux: return "RELU_AUX";
    case Epilogue::kDRelu: return "DRELU";
    case Epilogue::kDGelu: return "DGELU";
    case Epilogue::kBGradA: return "BGRADA";
    case Epilogue::kBGradB: return "BGRADB";
  }
  return "?";
}

const char *tensor_name(Tensor t) {
  static const char *names[] = {"x", "w", "dy", "z", "a", "bias", "dx", "dw", "db",
                                "dz", "zr", "ar", "aux", "ident", "scratch"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[i] : "none";
}

}  // namespace linear_bwd
