// The algorithm choice of linear_bwd_algo.h. The heuristic ranks algorithms by a model of
// the GPU, not by a run: on an H100 its first was 3-11% slower than torch.matmul at 16384
// rows (BENCHMARKS.md, linear), so the tuned variant times its first few on the real operands.
#include "linear_bwd_algo.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "linear_bwd_check.h"

namespace linear_bwd {
namespace {

constexpr int kMaxCandidates = 16;
constexpr int kTimedRuns = 5;

struct Choice {
  cublasLtMatmulHeuristicResult_t result;
  std::string how;
};

std::mutex cache_mu;
std::map<std::string, Choice> &cache() {
  static std::map<std::string, Choice> c;
  return c;
}

// Events for timing candidates, destroyed whichever way the timing returns.
struct Events {
  cudaEvent_t e[kTimedRuns + 1] = {};
  ~Events() {
    for (cudaEvent_t ev : e)
      if (ev) cudaEventDestroy(ev);
  }
};

// The median time (ms) of kTimedRuns runs of `algo` after one untimed run; a negative
// time where cuBLASLt refuses the algorithm at run time (the candidate is skipped).
Status time_candidate(const MatmulCall &call, const cublasLtMatmulAlgo_t &algo, Events &ev,
                      float *ms) {
  *ms = -1.f;
  if (run_matmul(call, algo) != CUBLAS_STATUS_SUCCESS) return Status::ok();
  for (int i = 0; i <= kTimedRuns; ++i) {
    CUDART_CHECK(cudaEventRecord(ev.e[i], call.stream));
    if (i < kTimedRuns) LT_CHECK(run_matmul(call, algo));
  }
  CUDART_CHECK(cudaEventSynchronize(ev.e[kTimedRuns]));
  float t[kTimedRuns];
  for (int i = 0; i < kTimedRuns; ++i)
    CUDART_CHECK(cudaEventElapsedTime(&t[i], ev.e[i], ev.e[i + 1]));
  std::sort(t, t + kTimedRuns);
  *ms = t[kTimedRuns / 2];
  return Status::ok();
}

std::string ms_text(float ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f ms", ms);
  return buf;
}

}  // namespace

cublasStatus_t run_matmul(const MatmulCall &call, const cublasLtMatmulAlgo_t &algo) {
  const float alpha = 1.f, beta = 0.f;
  return cublasLtMatmul(call.handle, call.op, &alpha, call.a, call.a_layout, call.b,
                        call.b_layout, &beta, call.d, call.d_layout, call.d, call.d_layout,
                        &algo, call.workspace, call.workspace_bytes, call.stream);
}

Status choose_algo(const MatmulCall &call, cublasLtMatmulPreference_t pref,
                   const std::string &key, const std::string &what, int candidates,
                   cublasLtMatmulHeuristicResult_t *chosen, std::string *how) {
  const int want = std::max(1, std::min(candidates, kMaxCandidates));
  if (want > 1) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache().find(key);
    if (it != cache().end()) {
      *chosen = it->second.result;
      *how = it->second.how;
      return Status::ok();
    }
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(want);
  int found = 0;
  const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(
      call.handle, call.op, call.a_layout, call.b_layout, call.d_layout, call.d_layout, pref,
      want, results.data(), &found);
  if (h == CUBLAS_STATUS_NOT_SUPPORTED || (h == CUBLAS_STATUS_SUCCESS && found == 0))
    return Status::unsupported("cuBLASLt's heuristic has no algorithm for " + what);
  if (h != CUBLAS_STATUS_SUCCESS)
    return Status::error(blas_error("cublasLtMatmulAlgoGetHeuristic", h) + " for " + what);
  *chosen = results[0];
  if (want == 1) {
    *how = "the heuristic's first";
    return Status::ok();
  }
  if (found == 1) {
    *how = "the heuristic's only algorithm";
  } else {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDART_CHECK(cudaStreamIsCapturing(call.stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      *how = "the heuristic's first (a stream being captured is not timed)";
      return Status::ok();
    }
    Events ev;
    for (cudaEvent_t &e : ev.e) CUDART_CHECK(cudaEventCreate(&e));
    int best = -1, timed = 0;
    float best_ms = 0.f, first_ms = -1.f;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      float ms = -1.f;
      const Status s = time_candidate(call, results[i].algo, ev, &ms);
      if (s.code != Status::kOk) return s;
      if (ms < 0) continue;
      ++timed;
      if (i == 0) first_ms = ms;
      if (best < 0 || ms < best_ms) {
        best = i;
        best_ms = ms;
      }
    }
    if (best < 0)
      return Status::unsupported("cuBLASLt refused every one of its heuristic's " +
                                 std::to_string(found) + " algorithms at run time for " + what);
    *chosen = results[best];
    *how = "the fastest of " + std::to_string(timed) + " timed (the heuristic's #" +
           std::to_string(best + 1) + ", " + ms_text(best_ms) +
           (first_ms >= 0 ? "; its #1 " + ms_text(first_ms) : std::string("; its #1 refused")) +
           ")";
  }
  std::lock_guard<std::mutex> lock(cache_mu);
  cache()[key] = Choice{*chosen, *how};
  return Status::ok();
}

}  // namespace linear_bwd
