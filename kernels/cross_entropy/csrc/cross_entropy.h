// Parameters of the fused cross-entropy forward + backward: one pass over each row of
// logits for the loss and dlogits, the non-ignored count and the loss reduction on the
// device (cross_entropy_plan.cpp says which kernel does what). Host code and kernels share
// it; no torch.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "../../common/csrc/dtype.h"

enum class CeReduction : int { kMean = 0, kSum = 1, kNone = 2 };

struct CrossEntropyParams {
  int64_t rows;                 // N tokens (< 2^31, the grid limit; checked by the binding)
  int vocab;                    // V
  DType dtype;                  // logits and dlogits
  const void *logits;
  void *dlogits;                // may be logits itself (in place)
  int64_t logits_row, dlogits_row;  // row strides in elements; the last dim contiguous
  const int64_t *targets;       // (N,) labels, not shifted
  const float *grad_loss;       // () for mean and sum, (N,) for none
  float *loss;                  // () for mean and sum, (N,) for none
  float *row_loss;              // (N,) workspace: per-token losses before the reduction
  int *count;                   // workspace: the non-ignored count (mean only)
  int64_t ignore_index;
  float label_smoothing, z_loss, softcap;  // softcap 0: off
  CeReduction reduction;
  bool shift;                   // position t scored against the label of t + 1
  int seq_len;                  // T, for the shift
};

// Which kernels and tiling a problem gets.
struct CrossEntropyPlan {
  bool count;       // a mean: the count kernel first, the rows kernel its programmatic dependent
  bool loss;        // a mean or sum: the loss kernel last
  bool vectorized;  // rows of whole 16-byte vectors, 16-byte aligned
  bool resident;    // rows read once, held in shared memory (cross_entropy_resident.cu)
  int cluster;      // resident: CTAs a row (1, or a cluster of up to kMaxCluster)
  int slice_vecs;   // resident: 16-byte vectors of the row a CTA holds
  // the streaming rows kernel (cross_entropy_rows.cu): one block a row; also where the
  // resident launch is refused (cudaErrorNotSupported)
  dim3 grid, block;
};

// clusters: the device launches thread-block clusters (cudaDevAttrClusterLaunch).
CrossEntropyPlan cross_entropy_plan(const CrossEntropyParams &p, bool clusters);
// The plan's kernels on `stream`: count (a mean), rows, loss (a mean or sum).
cudaError_t cross_entropy_launch(const CrossEntropyParams &p, const CrossEntropyPlan &plan,
                                 cudaStream_t stream);
