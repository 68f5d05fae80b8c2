// LayerNorm backward over the last dimension, from the saved fp32 mean and rstd: which
// kernel and tiling a problem gets (host code only).
//
// A row group of TPR threads (32 ... 1024) works on one row at a time; a thread owns the
// same columns on every row it visits (layer_norm_bwd_kernels.cuh). Vectorized rows of up
// to 8192 columns stream through a shared-memory ring (layer_norm_bwd_piped.cu); scalar
// rows and longer rows load into registers (layer_norm_bwd_rows.cu). Each block writes its
// groups' dgamma/dbeta column sums to one workspace row, and a second kernel adds the rows
// in a fixed order (layer_norm_bwd_cols.cu).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../../common/csrc/alignment.h"
#include "../../common/csrc/row_tiling.h"
#include "layer_norm_bwd.h"
#include "layer_norm_bwd_launchers.h"

int layer_norm_ws_row(int n) { return round_up(n, 8); }

LnBwdPlan layer_norm_bwd_plan(const LnBwdParams &p, bool partials, int sm_count) {
  LnBwdPlan plan{};
  const int es = elem_size(p.x_dtype);
  const int E = 16 / es;
  plan.vectorized = aligned(p.x, 16) && aligned(p.dy, 16) && aligned(p.dx, 16) &&
                    (!p.affine || aligned(p.gamma, 16)) && p.x_row % E == 0 &&
                    p.dy_row % E == 0 && p.dx_row % E == 0;
  const int64_t n = p.n;
  const size_t sums_row = 2 * size_t(layer_norm_ws_row(p.n)) * sizeof(float);  // a group's
  const int sm_threads = piped_threads_per_sm(es), per_thread = piped_per_thread(es);
  if (plan.vectorized && rowpipe::fits_rows(p.rows, n, per_thread) &&
      n <= int64_t(sm_threads) * per_thread) {  // ln_bwd_piped
    const rowpipe::RowShape shape = rowpipe::row_shape(n, E, per_thread);
    plan.piped = true;
    plan.tpr = shape.tpr;
    plan.chunks = shape.chunks;
    plan.block = dim3(unsigned(shape.threads));
    const int vecs = 2 * plan.chunks;  // x and dy
    const int gamma_bytes = piped_gamma_bytes(es, plan.chunks, p.affine);
    const size_t ring =
        rowpipe::ring_bytes(piped_stages(es, plan.chunks, p.affine), shape.threads, vecs) +
        size_t(gamma_bytes) * shape.threads;
    // the groups' column sums reuse the ring at the end
    const size_t sums = partials ? size_t(shape.threads / shape.tpr) * sums_row : 0;
    plan.smem_bytes = std::max(ring, sums);
    plan.parts = rowpipe::resident_grid(p.rows, shape, plan.smem_bytes, sm_count, sm_threads);
    plan.grid = dim3(unsigned(plan.parts));
    return plan;
  }
  const int max_tpr = plan.vectorized ? kMaxTpr : kScalarThreads;
  plan.streamed = n > int64_t(max_tpr) * kMaxPerThread;
  plan.tpr = plan.streamed ? max_tpr
                           : std::max(32, rowpipe::pow2_at_least((n + kMaxPerThread - 1) /
                                                                 kMaxPerThread));
  // chunks of TPR * E columns: the whole row (resident) or a span (streamed)
  const int64_t chunk = int64_t(plan.tpr) * E;
  plan.chunks = plan.streamed ? std::max(1, kMaxPerThread / E)
                              : rowpipe::pow2_at_least((n + chunk - 1) / chunk);
  const int threads = plan.vectorized ? plan.tpr : kScalarThreads;  // vectorized: streamed
  const int groups = threads / plan.tpr;
  plan.block = dim3(unsigned(threads));
  // resident blocks an SM: vectorized (1024 threads, <= 64 registers a thread) one; the
  // scalar kernel's 256 threads may take up to 255 registers: 2 assumed
  const int per_sm = plan.vectorized ? std::max(1, rowpipe::kThreadsPerSm / threads) : 2;
  const int64_t blocks = (p.rows + groups - 1) / groups;
  const int64_t cap = int64_t(std::max(sm_count, 1)) * per_sm;
  plan.parts = int(std::max<int64_t>(1, std::min(blocks, cap)));
  plan.grid = dim3(unsigned(plan.parts));
  plan.smem_bytes = (partials && !plan.streamed) ? size_t(groups) * sums_row : 0;
  return plan;
}
