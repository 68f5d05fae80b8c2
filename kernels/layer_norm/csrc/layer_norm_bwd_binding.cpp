// Thin torch binding of the LayerNorm backward: every check before launch, messages that
// name the tensor.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "layer_norm_bwd.h"
#include "ln_binding_checks.h"

void layer_norm_bwd(const at::Tensor &x_in, const at::Tensor &dy_in,
                    const c10::optional<at::Tensor> &gamma_in, const at::Tensor &mean_in,
                    const at::Tensor &rstd_in, const at::Tensor &dx,
                    const c10::optional<at::Tensor> &dgamma,
                    const c10::optional<at::Tensor> &dbeta) {
  TORCH_CHECK(x_in.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x_in.dim() == 2, "x must be (rows, hidden), got ", x_in.sizes());
  const int64_t M = x_in.size(0), N = x_in.size(1);
  // column indices are int: a span (8192 columns) past the end must still fit
  TORCH_CHECK(N <= (int64_t(1) << 31) - (int64_t(1) << 16), "hidden must be at most "
              "2^31 - 2^16, got ", N);
  check_ln_row_inputs(x_in, dy_in, mean_in, rstd_in);
  TORCH_CHECK(dx.sizes() == x_in.sizes(), "dx must have x's shape ", x_in.sizes(), ", got ",
              dx.sizes());
  check_like(dx, x_in, "dx");
  TORCH_CHECK(N <= 1 || dx.stride(1) == 1, "dx must be contiguous along hidden");
  const bool affine = gamma_in.has_value();
  // dgamma and dbeta both, or neither: with gamma and neither, only dx is computed
  const bool partials = dgamma.has_value();
  TORCH_CHECK(dbeta.has_value() == partials, "dgamma and dbeta are given together");
  TORCH_CHECK(!partials || affine, "dgamma and dbeta need gamma");
  if (affine) {
    const at::Tensor &g = *gamma_in;
    check_on(g, x_in, "gamma");
    TORCH_CHECK(g.scalar_type() == at::kFloat || g.scalar_type() == x_in.scalar_type(),
                "gamma must be float32 or x's dtype ", x_in.scalar_type(), ", got ",
                g.scalar_type());
    TORCH_CHECK(g.dim() == 1 && g.size(0) == N, "gamma must have shape (", N, "), got ",
                g.sizes());
  }
  if (partials) {
    check_vector_out(*dgamma, x_in, N, "dgamma");
    check_vector_out(*dbeta, x_in, N, "dbeta");
    check_like(*dgamma, *gamma_in, "dgamma");
    check_like(*dbeta, *gamma_in, "dbeta");
  }
  if (N == 0) return;  // nothing to compute: dx, dgamma and dbeta are empty
  c10::cuda::CUDAGuard guard(x_in.device());
  if (M == 0) {  // sums over no rows
    if (partials) {
      dgamma->zero_();
      dbeta->zero_();
    }
    return;
  }

  // the kernels index the hidden dimension with stride 1 and rows with any stride
  const at::Tensor x = (N <= 1 || x_in.stride(1) == 1) ? x_in : x_in.contiguous();
  const at::Tensor dy = (N <= 1 || dy_in.stride(1) == 1) ? dy_in : dy_in.contiguous();
  const at::Tensor mean = mean_in.reshape({M}).contiguous();
  const at::Tensor rstd = rstd_in.reshape({M}).contiguous();
  at::Tensor gamma;
  if (affine) gamma = gamma_in->contiguous();

  LnBwdParams p{};
  p.rows = M;
  p.n = int(N);
  p.x_dtype = dtype_of(x, "x");
  p.affine = affine;
  p.w_dtype = affine ? dtype_of(gamma, "gamma") : DType::kFloat32;
  p.x = x.data_ptr();
  p.dy = dy.data_ptr();
  p.dx = dx.data_ptr();
  p.mean = mean.data_ptr<float>();
  p.rstd = rstd.data_ptr<float>();
  p.x_row = x.stride(0);
  p.dy_row = dy.stride(0);
  p.dx_row = dx.stride(0);
  if (affine) p.gamma = gamma.data_ptr();
  if (partials) {
    p.dgamma = dgamma->data_ptr();
    p.dbeta = dbeta->data_ptr();
  }

  const int sm_count = sm_count_of(x, "layer_norm_bwd");
  const LnBwdPlan plan = layer_norm_bwd_plan(p, partials, sm_count);
  at::Tensor ws;
  if (partials) {
    ws = at::empty({plan.parts, 2, layer_norm_ws_row(p.n)}, x.options().dtype(at::kFloat));
    p.ws = ws.data_ptr<float>();
  }
  const cudaError_t err =
      layer_norm_bwd_launch(p, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "layer_norm_bwd launch failed: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bwd", &layer_norm_bwd,
        "LayerNorm backward (deterministic); with gamma but without dgamma and dbeta, dx only",
        py::arg("x"),
        py::arg("dy"), py::arg("gamma"), py::arg("mean"), py::arg("rstd"), py::arg("dx"),
        py::arg("dgamma"), py::arg("dbeta"));
}
