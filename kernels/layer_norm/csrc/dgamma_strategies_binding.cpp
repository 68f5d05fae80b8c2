// Thin torch binding of the dgamma/dbeta strategies (dgamma_strategies.cu): every check
// before launch, messages that name the tensor.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "dgamma_strategies.h"
#include "ln_binding_checks.h"

void layer_norm_dgamma(int64_t strategy, const at::Tensor &x_in, const at::Tensor &dy_in,
                       const at::Tensor &mean_in, const at::Tensor &rstd_in,
                       const at::Tensor &dgamma, const at::Tensor &dbeta) {
  TORCH_CHECK(strategy >= 0 && strategy <= int64_t(DgammaStrategy::kTile32Padded),
              "strategy must be 0 (column per thread), 1 (atomic), 2 (tile 32x32) or 3 "
              "(tile 32x33), got ", strategy);
  TORCH_CHECK(x_in.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x_in.dim() == 2, "x must be (rows, hidden), got ", x_in.sizes());
  const int64_t M = x_in.size(0), N = x_in.size(1);
  // column indices are int: the last 32-column tile must still fit
  TORCH_CHECK(N <= (int64_t(1) << 31) - 64, "hidden must be at most 2^31 - 64, got ", N);
  check_ln_row_inputs(x_in, dy_in, mean_in, rstd_in);
  check_vector_out(dgamma, x_in, N, "dgamma");
  check_vector_out(dbeta, x_in, N, "dbeta");
  check_like(dbeta, dgamma, "dbeta");
  if (N == 0) return;  // nothing to compute
  c10::cuda::CUDAGuard guard(x_in.device());

  // the kernels index the hidden dimension with stride 1 and rows with any stride
  const at::Tensor x = (N <= 1 || x_in.stride(1) == 1) ? x_in : x_in.contiguous();
  const at::Tensor dy = (N <= 1 || dy_in.stride(1) == 1) ? dy_in : dy_in.contiguous();
  const at::Tensor mean = mean_in.reshape({M}).contiguous();
  const at::Tensor rstd = rstd_in.reshape({M}).contiguous();

  LnBwdParams p{};
  p.rows = M;
  p.n = int(N);
  p.x_dtype = dtype_of(x, "x");
  p.w_dtype = dtype_of(dgamma, "dgamma");
  p.affine = true;
  p.x = x.data_ptr();
  p.dy = dy.data_ptr();
  p.mean = mean.data_ptr<float>();
  p.rstd = rstd.data_ptr<float>();
  p.dgamma = dgamma.data_ptr();
  p.dbeta = dbeta.data_ptr();
  p.x_row = x.stride(0);
  p.dy_row = dy.stride(0);

  const int sm_count = sm_count_of(x, "dgamma");
  const auto s = DgammaStrategy(strategy);
  const int64_t ws_floats = dgamma_workspace_floats(s, p, sm_count);
  at::Tensor ws;
  if (ws_floats > 0) {
    ws = at::empty({ws_floats}, x.options().dtype(at::kFloat));
    p.ws = ws.data_ptr<float>();
  }
  const cudaError_t err =
      dgamma_launch(s, p, sm_count, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "dgamma strategy ", strategy, " launch failed: ",
              cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("dgamma", &layer_norm_dgamma,
        "LayerNorm dgamma/dbeta by one of seed 002's strategies (0 column per thread, "
        "1 atomic, 2 tile 32x32, 3 tile 32x33)",
        py::arg("strategy"), py::arg("x"), py::arg("dy"), py::arg("mean"), py::arg("rstd"),
        py::arg("dgamma"), py::arg("dbeta"));
}
