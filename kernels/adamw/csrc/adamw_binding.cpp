// Thin torch binding of the one-launch AdamW step (adamw_step.cu): reads the Python lists
// without converting them to vectors of tensors (a step over 4000 tensors would spend
// milliseconds there), checks every tensor, and ships the tensor table to the device in
// one asynchronous copy from pinned memory.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

#include <unordered_map>
#include <vector>

#include "../../common/csrc/binding_checks.h"
#include "adamw.h"

namespace {

// The tensors of a Python list (or None: empty), borrowed from the list.
std::vector<const at::Tensor *> borrow(const py::handle &obj, const char *name) {
  std::vector<const at::Tensor *> out;
  if (obj.is_none()) return out;
  TORCH_CHECK(PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr()), name,
              " must be a list of tensors");
  const bool is_list = PyList_Check(obj.ptr());
  const Py_ssize_t n = is_list ? PyList_GET_SIZE(obj.ptr()) : PyTuple_GET_SIZE(obj.ptr());
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = is_list ? PyList_GET_ITEM(obj.ptr(), i) : PyTuple_GET_ITEM(obj.ptr(), i);
    TORCH_CHECK(THPVariable_Check(item), name, "[", i, "] is not a tensor");
    out.push_back(&THPVariable_Unpack(item));
  }
  return out;
}

// t is a contiguous CUDA tensor of `dtype` on ref's device.
void check_tensor(const at::Tensor &t, const at::Tensor &ref, at::ScalarType dtype,
                  const char *name, size_t i) {
  TORCH_CHECK(t.is_cuda() && t.device() == ref.device(), name, "[", i, "] must be on ",
              ref.device(), ", got ", t.device());
  TORCH_CHECK(t.scalar_type() == dtype, name, "[", i, "] must have dtype ", dtype, ", got ",
              t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), name, "[", i, "] must be contiguous");
}

// ... and has as many elements as its parameter p (the list's tensors differ in size).
void check_member(const at::Tensor &t, const at::Tensor &p, at::ScalarType dtype,
                  const char *name, size_t i) {
  check_tensor(t, p, dtype, name, i);
  TORCH_CHECK(t.numel() == p.numel(), name, "[", i, "] has ", t.numel(),
              " elements, its parameter ", p.numel());
}

// Per device: the blocks' partial results and the grid barrier (zeroed once; every launch
// leaves it zeroed), kept for the process's life.
struct Scratch {
  at::Tensor sumsq, found, barrier;
};
Scratch &scratch_for(const at::Tensor &ref, int grid) {
  static std::unordered_map<int, Scratch> per_device;
  Scratch &s = per_device[ref.get_device()];
  if (!s.barrier.defined()) {
    // a memset, not a fill kernel: the first call launches one kernel like every other
    s.barrier = at::empty({2}, ref.options().dtype(at::kInt));
    const cudaError_t err = cudaMemsetAsync(s.barrier.data_ptr(), 0, 2 * sizeof(int),
                                            c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == cudaSuccess, "adamw barrier memset: ", cudaGetErrorString(err));
  }
  if (!s.sumsq.defined() || s.sumsq.numel() < grid) {
    s.sumsq = at::empty({grid}, ref.options().dtype(at::kDouble));
    s.found = at::empty({grid}, ref.options().dtype(at::kInt));
  }
  return s;
}

}  // namespace

void adamw_step(py::handle params_obj, py::handle grads_obj, py::handle master_obj,
                py::handle exp_avg_obj, py::handle exp_avg_sq_obj, py::handle max_obj,
                const at::Tensor &found_inf, double lr, double beta1, double beta2,
                double eps, double weight_decay, int64_t step, int64_t steps, bool maximize,
                bool amsgrad, bool scaler, double loss_scale, double max_norm) {
  const auto params = borrow(params_obj, "params");
  const auto grads = borrow(grads_obj, "grads");
  const auto master = borrow(master_obj, "master");
  const auto m = borrow(exp_avg_obj, "exp_avg");
  const auto v = borrow(exp_avg_sq_obj, "exp_avg_sq");
  const auto vmax = borrow(max_obj, "max_exp_avg_sq");
  const size_t n = params.size();
  TORCH_CHECK(found_inf.is_cuda() && found_inf.scalar_type() == at::kFloat &&
                  found_inf.numel() == 1, "found_inf must be one fp32 CUDA element");
  TORCH_CHECK(grads.size() == n && m.size() == n && v.size() == n, "params, grads, exp_avg "
              "and exp_avg_sq must have one tensor each per parameter, got ", n, ", ",
              grads.size(), ", ", m.size(), ", ", v.size());
  TORCH_CHECK(!amsgrad || vmax.size() == n, "amsgrad needs one max_exp_avg_sq per parameter");
  TORCH_CHECK(master.empty() || master.size() == n, "one master per parameter, got ",
              master.size(), " for ", n);
  TORCH_CHECK(steps >= 1 && steps <= kAdamwMaxSteps, "steps must be in [1, ",
              kAdamwMaxSteps, "], got ", steps);
  TORCH_CHECK(step >= 1, "step must be at least 1, got ", step);
  TORCH_CHECK(loss_scale > 0, "loss_scale must be positive, got ", loss_scale);
  TORCH_CHECK(scaler || loss_scale == 1.0, "a loss scale needs the scaler, got ", loss_scale);
  if (n == 0) {
    found_inf.zero_();
    return;
  }
  const at::Tensor &ref = *params[0];
  TORCH_CHECK(ref.device() == found_inf.device(), "found_inf must be on ", ref.device());
  const at::ScalarType pdt = ref.scalar_type(), gdt = grads[0]->scalar_type();
  TORCH_CHECK(gdt == pdt || gdt == at::kFloat, "grads must have the parameters' dtype ", pdt,
              " or float32, got ", gdt);
  TORCH_CHECK(master.empty() || pdt != at::kFloat, "master weights need 16-bit parameters");

  const size_t bytes = n * sizeof(AdamwTensor);
  at::Tensor host = at::empty({int64_t(bytes)}, at::TensorOptions().dtype(at::kByte)
                                                    .pinned_memory(true));
  auto *table = reinterpret_cast<AdamwTensor *>(host.data_ptr());
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor &p = *params[i];
    check_tensor(p, ref, pdt, "params", i);
    check_member(*grads[i], p, gdt, "grads", i);
    check_member(*m[i], p, at::kFloat, "exp_avg", i);
    check_member(*v[i], p, at::kFloat, "exp_avg_sq", i);
    if (amsgrad) check_member(*vmax[i], p, at::kFloat, "max_exp_avg_sq", i);
    if (!master.empty()) check_member(*master[i], p, at::kFloat, "master", i);
    AdamwTensor &t = table[i];
    t.param = p.data_ptr();
    t.grad = grads[i]->data_ptr();
    t.exp_avg = m[i]->data_ptr<float>();
    t.exp_avg_sq = v[i]->data_ptr<float>();
    t.max_exp_avg_sq = amsgrad ? vmax[i]->data_ptr<float>() : nullptr;
    t.master = master.empty() ? nullptr : master[i]->data_ptr<float>();
    t.numel = p.numel();
    t.pad_ = 0;
  }
  const int64_t chunks = adamw_chunk_table(table, int(n));

  c10::cuda::CUDAGuard guard(ref.device());
  // the caching host allocator keeps `host` until this copy has run
  at::Tensor dev = host.to(ref.device(), /*non_blocking=*/true);

  AdamwParams a{};
  a.tensors = reinterpret_cast<const AdamwTensor *>(dev.data_ptr());
  a.n_tensors = int(n);
  a.n_chunks = chunks;
  a.param_dtype = dtype_of(ref, "params");
  a.grad_dtype = dtype_of(*grads[0], "grads");
  a.master = !master.empty();
  a.amsgrad = amsgrad;
  a.maximize = maximize;
  a.clip = max_norm > 0;
  a.scaler = scaler;
  a.lr = float(lr);
  a.beta1 = float(beta1);
  a.beta2 = float(beta2);
  a.one_minus_beta1 = float(1.0 - beta1);
  a.one_minus_beta2 = float(1.0 - beta2);
  a.beta1_d = beta1;
  a.beta2_d = beta2;
  a.eps = float(eps);
  a.decay = float(1.0 - lr * weight_decay);
  a.step = step;
  a.steps = int(steps);
  a.inv_scale = float(1.0 / loss_scale);
  a.max_norm = max_norm;
  a.found_inf = found_inf.data_ptr<float>();
  const int grid = adamw_max_grid(a);
  TORCH_CHECK(grid > 0, "adamw: no grid for this device: ",
              cudaGetErrorString(cudaError_t(-grid)));
  const AdamwPlan plan = adamw_plan(a, grid);
  Scratch &s = scratch_for(ref, grid);
  a.partial_sumsq = s.sumsq.data_ptr<double>();
  a.partial_found = s.found.data_ptr<int>();
  a.barrier = reinterpret_cast<unsigned *>(s.barrier.data_ptr<int>());
  const cudaError_t err = adamw_launch(a, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "adamw launch failed: ", cudaGetErrorString(err));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("step", &adamw_step,
        "AdamW steps over a parameter list in one launch (unscale, skip on inf, clip)",
        py::arg("params"), py::arg("grads"), py::arg("master"), py::arg("exp_avg"),
        py::arg("exp_avg_sq"), py::arg("max_exp_avg_sq"), py::arg("found_inf"),
        py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
        py::arg("weight_decay"), py::arg("step"), py::arg("steps"), py::arg("maximize"),
        py::arg("amsgrad"), py::arg("scaler"), py::arg("loss_scale"), py::arg("max_norm"));
}
