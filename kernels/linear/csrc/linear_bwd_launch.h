// Running a plan (linear_bwd_launch.cpp) and what it returns: no torch types, no cuBLAS
// types, no exceptions (a Status with the failing call named, and the facts of what ran).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"
#include "linear_bwd.h"

namespace linear_bwd {

constexpr int kTensorCount = static_cast<int>(Tensor::kScratch) + 1;

// Device pointers by Tensor (nullptr: not given) and the cuBLASLt workspace.
struct Buffers {
  void *ptr[kTensorCount] = {};
  void *workspace = nullptr;
  size_t workspace_bytes = 0;
};

struct Status {
  enum Code { kOk = 0, kUnsupported = 1, kError = 2 };
  Code code = kOk;
  std::string message;
  // what ran: each GEMM's epilogue and algorithm (id, tile, stages, split-K, reduction
  // scheme, workspace), where the derivative was applied
  std::vector<std::pair<std::string, std::string>> facts;

  static Status ok() { return Status{}; }
  static Status unsupported(std::string why) { return Status{kUnsupported, std::move(why), {}}; }
  static Status error(std::string why) { return Status{kError, std::move(why), {}}; }
  void fact(const std::string &name, const std::string &value) { facts.emplace_back(name, value); }
};

// The plan's steps in order on `stream` (the GEMMs on the device's cuBLASLt handle).
Status run_plan(const Problem &p, const Plan &plan, const Buffers &buf, DType dt, int device,
                cudaStream_t stream);
// The ReLU bitmask of x that DRELU reads (plan_relu_mask), into Buffers' kAux.
Status run_relu_mask(const Problem &p, const AuxLayout &aux, const Buffers &buf, DType dt,
                     int device, cudaStream_t stream);

}  // namespace linear_bwd
