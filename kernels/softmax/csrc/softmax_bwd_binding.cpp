// Thin torch binding of the softmax backward (+ fused dropout backward): every check
// before launch, messages that name the tensor.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "../../common/csrc/binding_checks.h"
#include "softmax_bwd.h"

namespace {

// The kernel takes a row stride per tensor and needs the last dim contiguous.
void check_last_dim(const at::Tensor &t, const char *name) {
  TORCH_CHECK(t.size(1) <= 1 || t.stride(1) == 1, name, ": the last dim must be contiguous "
              "(stride 1), got strides ", t.strides(), "; pass .contiguous()");
}

}  // namespace

void softmax_bwd(const at::Tensor &y, const at::Tensor &dy,
                 const c10::optional<at::Tensor> &mask, const c10::optional<double> &scale,
                 const at::Tensor &dx) {
  TORCH_CHECK(y.is_cuda(), "y must be a CUDA tensor");
  TORCH_CHECK(y.dim() == 2, "y must be (rows, N), got ", y.dim(), " dims");
  const int64_t R = y.size(0), N = y.size(1);
  TORCH_CHECK(R < (int64_t(1) << 31), "rows must be below 2^31, got ", R);
  TORCH_CHECK(N < (int64_t(1) << 31), "N must be below 2^31, got ", N);
  CHECK_SHAPE(dy, R, N);
  CHECK_SHAPE(dx, R, N);
  check_like(dy, y, "dy");
  check_like(dx, y, "dx");
  const DType dt = dtype_of(y, "y");
  check_last_dim(y, "y");
  check_last_dim(dy, "dy");
  check_last_dim(dx, "dx");
  TORCH_CHECK(R <= 1 || N == 0 || dx.stride(0) >= N, "dx: rows overlap (row stride ",
              dx.stride(0), " < N = ", N, ")");
  if (mask) {
    CHECK_SHAPE(*mask, R, N);
    TORCH_CHECK(mask->is_cuda() && mask->device() == y.device(), "mask must be on ", y.device());
    TORCH_CHECK(mask->scalar_type() == at::kBool, "mask must be bool, got ",
                mask->scalar_type());
    check_last_dim(*mask, "mask");
    TORCH_CHECK(scale.has_value(), "a dropout mask needs its scale 1/(1-p)");
  }

  SoftmaxBwdParams p{};
  p.rows = R;
  p.n = int(N);
  p.dtype = dt;
  p.dropout = mask.has_value();
  p.scale = mask ? float(*scale) : 1.f;
  p.y = y.data_ptr();
  p.dy = dy.data_ptr();
  p.dx = dx.data_ptr();
  p.y_row = y.stride(0);
  p.dy_row = dy.stride(0);
  p.dx_row = dx.stride(0);
  if (mask) {
    p.mask = reinterpret_cast<const uint8_t *>(mask->data_ptr<bool>());
    p.mask_row = mask->stride(0);
  }
  if (R == 0 || N == 0) return;

  c10::cuda::CUDAGuard guard(y.device());
  const SoftmaxBwdPlan plan = softmax_bwd_plan(p);
  const cudaError_t err =
      softmax_bwd_launch(p, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "softmax_bwd launch failed: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bwd", &softmax_bwd,
        "softmax backward along the last dim, optional fused dropout backward (deterministic)",
        py::arg("y"), py::arg("dy"), py::arg("mask"), py::arg("scale"), py::arg("dx"));
}
