// Parameters of the fused cross-entropy forward + backward (cross_entropy.cu): one pass
// over each row of logits for the loss and dlogits, the non-ignored count and the loss
// reduction on the device. Host code and kernels share it; no torch.
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

// Launches (count for a mean, rows, loss reduction for a mean or sum) on `stream`.
cudaError_t cross_entropy_launch(const CrossEntropyParams &p, cudaStream_t stream);

// The rows kernel that reads each row once, holding it in shared memory (split over a
// cluster of CTAs when long; cross_entropy_resident.cu), for rows of 16-byte vectors:
// cudaErrorNotSupported where the row does not fit or the device has no clusters, and
// the caller streams the row instead. after_count: launched as a programmatic dependent
// of the count kernel.
cudaError_t ce_resident_launch(const CrossEntropyParams &p, bool after_count,
                               cudaStream_t stream);
