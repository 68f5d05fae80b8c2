// Thin torch binding of the fused cross entropy (cross_entropy_plan.cpp): every check
// before the launch, messages that name the tensor; the small workspaces from torch's
// allocator.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <string>

#include "../../common/csrc/binding_checks.h"
#include "cross_entropy.h"

namespace {

CeReduction reduction_of(const std::string &r) {
  if (r == "mean") return CeReduction::kMean;
  if (r == "sum") return CeReduction::kSum;
  TORCH_CHECK(r == "none", "reduction must be mean, sum or none, got ", r);
  return CeReduction::kNone;
}

void check_rows(const at::Tensor &t, const char *name) {
  TORCH_CHECK(t.size(1) <= 1 || t.stride(1) == 1, name, ": the last dim must be contiguous "
              "(stride 1), got strides ", t.strides(), "; pass .contiguous()");
}

}  // namespace

void cross_entropy_fwd_bwd(const at::Tensor &logits, const at::Tensor &targets,
                           const at::Tensor &grad_loss, const at::Tensor &loss,
                           const at::Tensor &dlogits, int64_t ignore_index,
                           double label_smoothing, const std::string &reduction,
                           double z_loss, double softcap, bool shift, int64_t seq_len) {
  TORCH_CHECK(logits.is_cuda(), "logits must be a CUDA tensor");
  TORCH_CHECK(logits.dim() == 2, "logits must be (N, V), got ", logits.dim(), " dims");
  const int64_t N = logits.size(0), V = logits.size(1);
  TORCH_CHECK(N < (int64_t(1) << 31), "N must be below 2^31, got ", N);
  TORCH_CHECK(V >= 1 && V < (int64_t(1) << 31), "V must be in [1, 2^31), got ", V);
  CHECK_SHAPE(dlogits, N, V);
  check_like(dlogits, logits, "dlogits");
  check_rows(logits, "logits");
  check_rows(dlogits, "dlogits");
  CHECK_SHAPE(targets, N);
  check_on(targets, logits, "targets");
  TORCH_CHECK(targets.scalar_type() == at::kLong && targets.is_contiguous(),
              "targets must be contiguous int64");
  const CeReduction red = reduction_of(reduction);
  check_on(grad_loss, logits, "grad_loss");
  check_on(loss, logits, "loss");
  TORCH_CHECK(grad_loss.scalar_type() == at::kFloat && loss.scalar_type() == at::kFloat,
              "grad_loss and loss must be float32");
  if (red == CeReduction::kNone) {
    CHECK_SHAPE(grad_loss, N);
    CHECK_SHAPE(loss, N);
    TORCH_CHECK(grad_loss.is_contiguous() && loss.is_contiguous(),
                "grad_loss and loss must be contiguous");
  } else {
    TORCH_CHECK(grad_loss.numel() == 1 && loss.numel() == 1,
                "grad_loss and loss must be scalars for reduction ", reduction);
  }
  TORCH_CHECK(!shift || (seq_len >= 1 && N % seq_len == 0), "shift needs seq_len dividing N ",
              N, ", got ", seq_len);

  c10::cuda::CUDAGuard guard(logits.device());
  const auto f32 = logits.options().dtype(at::kFloat);
  at::Tensor row_loss = red == CeReduction::kNone ? loss : at::empty({N}, f32);
  at::Tensor count = at::empty({1}, logits.options().dtype(at::kInt));

  CrossEntropyParams p{};
  p.rows = N;
  p.vocab = int(V);
  p.dtype = dtype_of(logits, "logits");
  p.logits = logits.data_ptr();
  p.dlogits = dlogits.data_ptr();
  p.logits_row = logits.stride(0);
  p.dlogits_row = dlogits.stride(0);
  p.targets = targets.data_ptr<int64_t>();
  p.grad_loss = grad_loss.data_ptr<float>();
  p.loss = loss.data_ptr<float>();
  p.row_loss = row_loss.data_ptr<float>();
  p.count = count.data_ptr<int>();
  p.ignore_index = ignore_index;
  p.label_smoothing = float(label_smoothing);
  p.z_loss = float(z_loss);
  p.softcap = float(softcap);
  p.reduction = red;
  p.shift = shift;
  p.seq_len = int(shift ? seq_len : 1);
  int clusters = 0;  // the resident rows kernel needs thread-block clusters
  const cudaError_t query =
      cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, logits.get_device());
  TORCH_CHECK(query == cudaSuccess, "cross_entropy: cudaDeviceGetAttribute failed: ",
              cudaGetErrorString(query));
  const CrossEntropyPlan plan = cross_entropy_plan(p, clusters != 0);
  const cudaError_t err =
      cross_entropy_launch(p, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "cross_entropy launch failed: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fwd_bwd", &cross_entropy_fwd_bwd,
        "cross entropy loss and dlogits in one pass over the logits (shift, smoothing, "
        "z-loss, softcap; count and loss reduction on the device)");
}
