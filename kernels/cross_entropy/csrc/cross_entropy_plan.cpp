// Cross entropy forward and backward together: which kernels and tiling a problem gets
// (host code only). In order, on one stream:
//   count (a mean only): the non-ignored targets, counted on the device by one block
//     (cross_entropy_count.cu);
//   rows: the loss and dlogits of each row. Rows of 16-byte vectors read the logits once,
//     held in shared memory by a CTA, or by a cluster of up to kMaxCluster CTAs each
//     holding a slice of the row where it is longer than kSliceTarget bytes
//     (cross_entropy_resident.cu); the others, or where the device launches no clusters,
//     are streamed twice by one block a row (cross_entropy_rows.cu). Launched after the
//     count, a rows kernel overlaps it (its reads need nothing the count writes); launched
//     first, it must not start before the work that wrote the logits;
//   loss (a mean or sum): the per-token losses summed in a fixed order
//     (cross_entropy_loss.cu).
// No atomics, no host sync: the same bits every call.

#include <climits>
#include <cstdint>

#include "../../common/csrc/alignment.h"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"

namespace {

// Threads per row block: about four accesses a thread, 32 to 1024.
int row_threads(int vectors) {
  int t = 32;
  while (t < kMaxThreads && t * 4 < vectors) t *= 2;
  return t;
}

}  // namespace

CrossEntropyPlan cross_entropy_plan(const CrossEntropyParams &p, bool clusters) {
  CrossEntropyPlan plan{};
  plan.count = p.reduction == CeReduction::kMean;
  plan.loss = p.reduction != CeReduction::kNone;
  const int es = elem_size(p.dtype);
  plan.vectorized = p.vocab % (16 / es) == 0 && (p.logits_row * es) % 16 == 0 &&
                    (p.dlogits_row * es) % 16 == 0 && aligned(p.logits, 16) &&
                    aligned(p.dlogits, 16);
  const int n = plan.vectorized ? 16 / es : 1;
  plan.grid = dim3(unsigned(p.rows));
  plan.block = dim3(unsigned(row_threads(p.vocab / n)));
  if (plan.vectorized && clusters) {
    const int64_t vecs = int64_t(p.vocab) * es / 16;
    int cluster = 1;
    while (cluster < kMaxCluster && (vecs + cluster - 1) / cluster * 16 > kSliceTarget) cluster *= 2;
    const int64_t slice_vecs = (vecs + cluster - 1) / cluster;
    plan.resident = slice_vecs * 16 <= kSliceMax && p.rows * cluster <= INT_MAX;
    if (plan.resident) {
      plan.cluster = cluster;
      plan.slice_vecs = int(slice_vecs);
    }
  }
  return plan;
}
