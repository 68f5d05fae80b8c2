// Torch binding of the cuBLASLt linear backward: the plan as a dict (`plan`), the ReLU
// bitmask a forward's RELU_AUX would have saved (`relu_mask`), and the backward (`run`).
// Every tensor the plan names is checked before anything runs (device, dtype, shape,
// strides against the plan's leading dimensions); a refusal or failure comes back in the
// returned dict ({"status": "ok" | "unsupported" | "error", "message", facts...}), never as
// a C++ exception (those crashed the H200 image's Python: docs/cuda-kernels.md).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <map>
#include <string>
#include <vector>

#include "linear_bwd.h"
#include "linear_bwd_launch.h"

namespace py = pybind11;
using namespace linear_bwd;

namespace {

constexpr int kProblemFields = 11;  // m n k act act_at bias recompute x_t w_t dy_t elem_bytes

std::string problem_of(const std::vector<int64_t> &v, Problem *p) {
  if (v.size() != kProblemFields)
    return "problem: expected " + std::to_string(kProblemFields) + " integers (m n k act "
           "act_at bias recompute x_t w_t dy_t elem_bytes), got " + std::to_string(v.size());
  if (v[0] < 1 || v[1] < 1 || v[2] < 1) return "problem: m, n, k must be at least 1";
  if (v[3] < 0 || v[3] > 4 || v[4] < 0 || v[4] > 1) return "problem: act or act_at out of range";
  p->m = v[0];
  p->n = v[1];
  p->k = v[2];
  p->act = Act(v[3]);
  p->act_at = ActAt(v[4]);
  p->bias = v[5] != 0;
  p->recompute = v[6] != 0;
  p->x_t = v[7] != 0;
  p->w_t = v[8] != 0;
  p->dy_t = v[9] != 0;
  p->elem_bytes = static_cast<int>(v[10]);
  return "";
}

py::dict matrix_dict(const Matrix &m) {
  py::dict d;
  d["tensor"] = tensor_name(m.tensor);
  d["rows"] = m.rows;
  d["cols"] = m.cols;
  d["col_major"] = m.col_major;
  d["ld"] = m.ld;
  return d;
}

py::dict status_dict(const Status &s) {
  py::dict d;
  d["status"] = s.code == Status::kOk ? "ok" : s.code == Status::kUnsupported ? "unsupported"
                                                                              : "error";
  d["message"] = s.message;
  py::dict facts;
  for (const auto &f : s.facts) facts[py::str(f.first)] = f.second;
  d["facts"] = facts;
  return d;
}

bool dtype_of(const at::Tensor &t, DType *out) {
  switch (t.scalar_type()) {
    case at::kFloat: *out = DType::kFloat32; return true;
    case at::kHalf: *out = DType::kFloat16; return true;
    case at::kBFloat16: *out = DType::kBFloat16; return true;
    default: return false;
  }
}

// Why `t` cannot be the plan's matrix `m` (dtype `dt`, on x's device), or "".
std::string check_matrix(const char *name, const at::Tensor &t, const Matrix &m,
                         const at::Tensor &ref) {
  if (!t.is_cuda() || t.device() != ref.device())
    return std::string(name) + " must be on " + ref.device().str();
  if (t.scalar_type() != ref.scalar_type())
    return std::string(name) + " must have x's dtype";
  if (t.dim() != 2 || t.size(0) != m.rows || t.size(1) != m.cols)
    return std::string(name) + " must have shape (" + std::to_string(m.rows) + ", " +
           std::to_string(m.cols) + ")";
  const int64_t want[2] = {m.col_major ? 1 : m.ld, m.col_major ? m.ld : 1};
  for (int d = 0; d < 2; ++d)  // a dimension of size 1 has no stride that matters
    if (t.size(d) > 1 && t.stride(d) != want[d])
      return std::string(name) + " must be stored " + (m.col_major ? "column" : "row") +
             "-major at leading dimension " + std::to_string(m.ld) + ", got strides (" +
             std::to_string(t.stride(0)) + ", " + std::to_string(t.stride(1)) + ")";
  return "";
}

std::string check_vector(const char *name, const at::Tensor &t, int64_t n, const at::Tensor &ref) {
  if (!t.is_cuda() || t.device() != ref.device() || t.scalar_type() != ref.scalar_type())
    return std::string(name) + " must be on x's device with x's dtype";
  if (t.numel() != n || !t.is_contiguous())
    return std::string(name) + " must be a contiguous vector of " + std::to_string(n);
  return "";
}

// The tensors by name into `buf`, each checked where the plan reads or writes it.
std::string gather(const Problem &p, const std::map<std::string, at::Tensor> &tensors,
                   const std::vector<Matrix> &matrices, Buffers *buf) {
  auto x = tensors.find("x");
  if (x == tensors.end()) return "x was not given";
  for (const auto &kv : tensors) {
    int id = -1;
    for (int i = 0; i < kTensorCount; ++i)
      if (kv.first == tensor_name(Tensor(i))) id = i;
    if (id < 0) return "unknown tensor " + kv.first;
    buf->ptr[id] = kv.second.data_ptr();
  }
  for (const Matrix &m : matrices) {
    auto it = tensors.find(tensor_name(m.tensor));
    if (it == tensors.end()) return std::string(tensor_name(m.tensor)) + " was not given";
    const std::string why = check_matrix(tensor_name(m.tensor), it->second, m, x->second);
    if (!why.empty()) return why;
  }
  for (const char *v : {"bias", "db"}) {
    auto it = tensors.find(v);
    if (it != tensors.end()) {
      const std::string why = check_vector(v, it->second, p.n, x->second);
      if (!why.empty()) return why;
    }
  }
  return "";
}

Status invalid(const std::string &why) { return Status::error("linear_bwd binding: " + why); }

}  // namespace

py::dict plan(const std::vector<int64_t> &problem) {
  Problem p;
  const std::string bad = problem_of(problem, &p);
  py::dict d;
  if (!bad.empty()) {
    d["unsupported"] = "";
    d["error"] = bad;
    return d;
  }
  const Plan pl = plan_backward(p);
  d["unsupported"] = pl.unsupported;
  d["derivative"] = pl.derivative;
  py::list temps;
  for (const Temporary &t : pl.temporaries) temps.append(matrix_dict(t.matrix));
  d["temporaries"] = temps;
  py::list steps;
  for (const Step &s : pl.steps)
    steps.append(s.is_gemm ? s.gemm.name + " " + epilogue_name(s.gemm.epilogue)
                           : s.elementwise.name + " elementwise");
  d["steps"] = steps;
  py::dict aux;
  aux["needed"] = pl.aux.needed;
  aux["bitmask"] = pl.aux.bitmask;
  aux["rows"] = pl.aux.rows;
  aux["cols"] = pl.aux.cols;
  aux["ld"] = pl.aux.ld;
  aux["copy_of_x"] = pl.aux.copy_of_x;
  if (pl.aux.bitmask) {
    const Gemm g = plan_relu_mask(p, pl.aux);
    aux["identity"] = g.k;                 // the identity matrix is k x k
    aux["scratch_rows"] = g.m;             // the product D, thrown away
    aux["scratch_cols"] = g.n;
  }
  d["aux"] = aux;
  return d;
}

// The matrices a plan reads or writes (x, w, dy, z, a, dx, dw and the temporaries), for
// the checks.
std::vector<Matrix> matrices_of(const Problem &p, const Plan &pl,
                                const std::map<std::string, at::Tensor> &tensors) {
  std::vector<Matrix> out = {matrix_of(p, Tensor::kX), matrix_of(p, Tensor::kW),
                             matrix_of(p, Tensor::kDy), matrix_of(p, Tensor::kDx),
                             matrix_of(p, Tensor::kDw)};
  for (Tensor t : {Tensor::kZ, Tensor::kA})
    if (tensors.count(tensor_name(t))) out.push_back(matrix_of(p, t));
  for (const Temporary &t : pl.temporaries) out.push_back(t.matrix);
  return out;
}

py::dict run(const std::vector<int64_t> &problem,
             const std::map<std::string, at::Tensor> &tensors, at::Tensor workspace) {
  Problem p;
  std::string bad = problem_of(problem, &p);
  if (!bad.empty()) return status_dict(invalid(bad));
  const Plan pl = plan_backward(p);
  if (!pl.unsupported.empty()) return status_dict(Status::unsupported(pl.unsupported));
  Buffers buf;
  bad = gather(p, tensors, matrices_of(p, pl, tensors), &buf);
  if (!bad.empty()) return status_dict(invalid(bad));
  const at::Tensor &x = tensors.at("x");
  DType dt;
  if (!dtype_of(x, &dt)) return status_dict(invalid("x: dtype not float32, float16, bfloat16"));
  if (!workspace.is_cuda() || workspace.device() != x.device())
    return status_dict(invalid("the workspace must be on x's device"));
  buf.workspace = workspace.data_ptr();
  buf.workspace_bytes = static_cast<size_t>(workspace.numel() * workspace.element_size());
  const c10::cuda::CUDAGuard guard(x.device());
  return status_dict(run_plan(p, pl, buf, dt, x.get_device(),
                              c10::cuda::getCurrentCUDAStream(x.get_device()).stream()));
}

py::dict relu_mask(const std::vector<int64_t> &problem,
                   const std::map<std::string, at::Tensor> &tensors, at::Tensor workspace) {
  Problem p;
  std::string bad = problem_of(problem, &p);
  if (!bad.empty()) return status_dict(invalid(bad));
  const Plan pl = plan_backward(p);
  if (!pl.aux.bitmask) return status_dict(invalid("the plan reads no ReLU bitmask"));
  const Gemm g = plan_relu_mask(p, pl.aux);
  for (const char *name : {"x", "ident", "scratch", "aux"})
    if (!tensors.count(name)) return status_dict(invalid(std::string(name) + " was not given"));
  const at::Tensor &x = tensors.at("x");
  const at::Tensor &aux = tensors.at("aux");
  if (aux.numel() * aux.element_size() < pl.aux.ld / 8 * pl.aux.cols)
    return status_dict(invalid("aux holds fewer than ld / 8 x cols bytes"));
  if (tensors.at("ident").numel() < g.k * g.k || tensors.at("scratch").numel() < g.m * g.n)
    return status_dict(invalid("ident or scratch too small for the mask's GEMM"));
  Buffers buf;
  bad = gather(p, tensors, {matrix_of(p, Tensor::kX)}, &buf);
  if (!bad.empty()) return status_dict(invalid(bad));
  DType dt;
  if (!dtype_of(x, &dt)) return status_dict(invalid("x: dtype not float32, float16, bfloat16"));
  buf.workspace = workspace.data_ptr();
  buf.workspace_bytes = static_cast<size_t>(workspace.numel() * workspace.element_size());
  const c10::cuda::CUDAGuard guard(x.device());
  return status_dict(run_relu_mask(p, pl.aux, buf, dt, x.get_device(),
                                   c10::cuda::getCurrentCUDAStream(x.get_device()).stream()));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("plan", &plan, "the plan of a problem (m n k act act_at bias recompute x_t w_t dy_t "
                       "elem_bytes) as a dict");
  m.def("run", &run, "the backward through cuBLASLt; returns {status, message, facts}");
  m.def("relu_mask", &relu_mask, "x's ReLU bitmask by a RELU_AUX GEMM; returns "
                                 "{status, message, facts}");
}
