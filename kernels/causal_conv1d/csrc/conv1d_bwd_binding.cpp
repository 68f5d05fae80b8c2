// Thin torch binding: every check before launch, messages that name the tensor.
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include "../../common/csrc/binding_checks.h"
#include "conv1d_bwd.h"

void causal_conv1d_bwd(const at::Tensor &x, const at::Tensor &weight,
                       const c10::optional<at::Tensor> &bias, const at::Tensor &dout,
                       const c10::optional<at::Tensor> &seq_idx,
                       const c10::optional<at::Tensor> &initial_states,
                       const c10::optional<at::Tensor> &dfinal_states, const at::Tensor &dx,
                       const at::Tensor &dweight, const c10::optional<at::Tensor> &dbias,
                       const c10::optional<at::Tensor> &dinitial_states, bool silu) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.dim() == 3, "x must be (batch, dim, seqlen)");
  const int64_t B = x.size(0), D = x.size(1), L = x.size(2), K = weight.size(-1);
  TORCH_CHECK(K >= 2 && K <= 4, "width must be 2, 3 or 4, got ", K);
  TORCH_CHECK(B * D < (int64_t(1) << 31), "batch * dim must be below 2^31");
  // step indices are int: a tile or span end past the sequence must still fit
  TORCH_CHECK(L <= (int64_t(1) << 31) - (int64_t(1) << 16), "seqlen must be at most "
              "2^31 - 2^16, got ", L);
  // channel-last (time not contiguous): the kernel takes one grid z index a batch
  TORCH_CHECK(x.stride(2) == 1 || B <= 65535, "batch must be at most 65535 unless x is "
              "contiguous along time (channel-last: one grid z index a batch), got ", B);
  CHECK_SHAPE(weight, D, K);
  CHECK_SHAPE(dout, B, D, L);
  CHECK_SHAPE(dx, B, D, L);
  CHECK_SHAPE(dweight, D, K);
  check_like(dout, x, "dout");
  check_like(dx, x, "dx");
  TORCH_CHECK(weight.is_cuda() && weight.device() == x.device(), "weight must be on ",
              x.device());
  TORCH_CHECK(weight.scalar_type() == at::kFloat || weight.scalar_type() == x.scalar_type(),
              "weight must be float32 or x's dtype");
  check_like(dweight, weight, "dweight");
  TORCH_CHECK(bias.has_value() == dbias.has_value(), "bias and dbias go together");
  if (bias) {
    CHECK_SHAPE(*bias, D);
    CHECK_SHAPE(*dbias, D);
    check_like(*bias, weight, "bias");
    check_like(*dbias, weight, "dbias");
  }
  if (seq_idx) {
    CHECK_SHAPE(*seq_idx, B, L);
    TORCH_CHECK(seq_idx->scalar_type() == at::kInt && seq_idx->device() == x.device(),
                "seq_idx must be int32 on ", x.device());
  }
  if (initial_states) {
    CHECK_SHAPE(*initial_states, B, D, K - 1);
    check_like(*initial_states, x, "initial_states");
  }
  if (dfinal_states) {
    CHECK_SHAPE(*dfinal_states, B, D, K - 1);
    check_like(*dfinal_states, x, "dfinal_states");
  }
  if (dinitial_states) {
    TORCH_CHECK(initial_states.has_value(), "dinitial_states needs initial_states");
    CHECK_SHAPE(*dinitial_states, B, D, K - 1);
    check_like(*dinitial_states, x, "dinitial_states");
  }

  ConvBwdParams p{};
  p.batch = int(B); p.dim = int(D); p.seqlen = int(L); p.width = int(K);
  p.x_dtype = dtype_of(x, "x");
  p.w_dtype = dtype_of(weight, "weight");
  p.silu = silu;
  p.has_bias = bias.has_value();
  p.has_seq_idx = seq_idx.has_value();
  p.has_init = initial_states.has_value();
  p.has_dfinal = dfinal_states.has_value();
  p.want_dinit = dinitial_states.has_value();
  p.x = x.data_ptr(); p.weight = weight.data_ptr(); p.dout = dout.data_ptr();
  p.dx = dx.data_ptr(); p.dweight = dweight.data_ptr();
  p.x_b = x.stride(0); p.x_d = x.stride(1); p.x_t = x.stride(2);
  p.dout_b = dout.stride(0); p.dout_d = dout.stride(1); p.dout_t = dout.stride(2);
  p.dx_b = dx.stride(0); p.dx_d = dx.stride(1); p.dx_t = dx.stride(2);
  p.w_d = weight.stride(0); p.w_k = weight.stride(1);
  p.dw_d = dweight.stride(0); p.dw_k = dweight.stride(1);
  if (bias) {
    p.bias = bias->data_ptr(); p.bias_d = bias->stride(0);
    p.dbias = dbias->data_ptr(); p.dbias_d = dbias->stride(0);
  }
  if (seq_idx) {
    p.seq_idx = seq_idx->data_ptr<int32_t>();
    p.seq_b = seq_idx->stride(0); p.seq_t = seq_idx->stride(1);
  }
  if (initial_states) {
    p.init = initial_states->data_ptr();
    p.init_b = initial_states->stride(0); p.init_d = initial_states->stride(1);
    p.init_t = initial_states->stride(2);
  }
  if (dfinal_states) {
    p.dfinal = dfinal_states->data_ptr();
    p.dfinal_b = dfinal_states->stride(0); p.dfinal_d = dfinal_states->stride(1);
    p.dfinal_t = dfinal_states->stride(2);
  }
  if (dinitial_states) {
    p.dinit = dinitial_states->data_ptr();
    p.dinit_b = dinitial_states->stride(0); p.dinit_d = dinitial_states->stride(1);
    p.dinit_t = dinitial_states->stride(2);
  }
  if (L == 0 || D == 0 || B == 0) return;

  c10::cuda::CUDAGuard guard(x.device());
  const ConvBwdPlan plan = conv1d_bwd_plan(p);
  at::Tensor ws = at::empty({plan.parts, D, K + 1}, x.options().dtype(at::kFloat));
  p.ws = ws.data_ptr<float>();
  const cudaError_t err = conv1d_bwd_launch(p, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "causal_conv1d_bwd launch failed: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bwd", &causal_conv1d_bwd, "causal conv1d backward (deterministic)", py::arg("x"),
        py::arg("weight"), py::arg("bias"), py::arg("dout"), py::arg("seq_idx"),
        py::arg("initial_states"), py::arg("dfinal_states"), py::arg("dx"),
        py::arg("dweight"), py::arg("dbias"), py::arg("dinitial_states"), py::arg("silu"));
}
