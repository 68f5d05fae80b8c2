// Prints the cuBLASLt plans of our linear backward (kernels/linear/csrc/linear_bwd_plan.cpp),
// one JSON object a line, for problems read from stdin: host code only, no cuBLAS header
// and no device, so tests/linear/test_cublaslt_plan.py replays them on the CPU.
//   m n k act act_at bias recompute x_t w_t dy_t elem_bytes
// act: 0 none, 1 relu, 2 gelu (erf), 3 gelu tanh, 4 silu; act_at: 0 output, 1 input.
#include <cstdio>
#include <string>

#include "../../../kernels/linear/csrc/linear_bwd.h"

using namespace linear_bwd;

namespace {

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string matrix(const Matrix &a) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"tensor\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"col_major\": %s, "
                "\"ld\": %lld}",
                tensor_name(a.tensor), (long long)a.rows, (long long)a.cols,
                a.col_major ? "true" : "false", (long long)a.ld);
  return buf;
}

std::string gemm(const Gemm &g) {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "{\"kind\": \"gemm\", \"name\": %s, \"a\": \"%s\", \"b\": \"%s\", \"d\": \"%s\", "
                "\"trans_a\": %s, \"trans_b\": %s, \"m\": %lld, \"n\": %lld, \"k\": %lld, "
                "\"lda\": %lld, \"ldb\": %lld, \"ldd\": %lld, \"epilogue\": \"%s\", "
                "\"aux\": \"%s\", \"aux_ld\": %lld, \"bias\": \"%s\"}",
                quoted(g.name).c_str(), tensor_name(g.a), tensor_name(g.b), tensor_name(g.d),
                g.trans_a ? "true" : "false", g.trans_b ? "true" : "false", (long long)g.m,
                (long long)g.n, (long long)g.k, (long long)g.lda, (long long)g.ldb,
                (long long)g.ldd, epilogue_name(g.epilogue), tensor_name(g.aux),
                (long long)g.aux_ld, tensor_name(g.bias));
  return buf;
}

std::string elementwise(const Elementwise &e) {
  return "{\"kind\": \"elementwise\", \"name\": " + quoted(e.name) + ", \"out\": " +
         matrix(e.out) + ", \"in\": " + matrix(e.in) + ", \"grad\": " + matrix(e.grad) +
         ", \"derivative\": " + (e.derivative ? "true" : "false") + ", \"walks_columns\": " +
         (walks_columns(e.out.row_stride(), e.out.col_stride(), e.out.cols) ? "true" : "false") +
         "}";
}

}  // namespace

int main() {
  long long m, n, k;
  int act, at, bias, recompute, xt, wt, dyt, es;
  while (std::scanf("%lld %lld %lld %d %d %d %d %d %d %d %d", &m, &n, &k, &act, &at, &bias,
                    &recompute, &xt, &wt, &dyt, &es) == 11) {
    Problem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.act = Act(act);
    p.act_at = ActAt(at);
    p.bias = bias != 0;
    p.recompute = recompute != 0;
    p.x_t = xt != 0;
    p.w_t = wt != 0;
    p.dy_t = dyt != 0;
    p.elem_bytes = es;
    const Plan plan = plan_backward(p);
    std::string out = "{\"unsupported\": " + quoted(plan.unsupported) +
                      ", \"derivative\": " + quoted(plan.derivative) + ", \"temporaries\": [";
    for (size_t i = 0; i < plan.temporaries.size(); ++i)
      out += (i ? ", " : "") + matrix(plan.temporaries[i].matrix);
    out += "], \"steps\": [";
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step &s = plan.steps[i];
      out += (i ? ", " : "") + (s.is_gemm ? gemm(s.gemm) : elementwise(s.elementwise));
    }
    char aux[256];
    std::snprintf(aux, sizeof aux,
                  "], \"aux\": {\"needed\": %s, \"bitmask\": %s, \"rows\": %lld, \"cols\": %lld, "
                  "\"ld\": %lld, \"copy_of_x\": %s}",
                  plan.aux.needed ? "true" : "false", plan.aux.bitmask ? "true" : "false",
                  (long long)plan.aux.rows, (long long)plan.aux.cols, (long long)plan.aux.ld,
                  plan.aux.copy_of_x ? "true" : "false");
    out += aux;
    if (plan.aux.bitmask) out += ", \"relu_mask\": " + gemm(plan_relu_mask(p, plan.aux));
    std::printf("%s}\n", out.c_str());
  }
  return 0;
}
