// The AdamW step: how a launch covers the parameter list (host code only).
//
// The list is cut into chunks of kAdamwChunk elements, numbered tensor by tensor; a
// persistent cooperative grid (adamw_step.cu) walks them, block b taking chunks b, b + grid,
// ... . Its blocks synchronize once (the skip and the norm), so every one must be resident
// at once: the grid is the most blocks the device holds (adamw_max_grid), but never more
// than there are chunks.

#include <cstdint>

#include "../../common/csrc/alignment.h"
#include "adamw.h"
#include "adamw_launchers.h"

int64_t adamw_chunk_table(AdamwTensor *tensors, int n_tensors) {
  int64_t chunks = 0;
  for (int i = 0; i < n_tensors; ++i) {
    AdamwTensor &t = tensors[i];
    t.aligned = aligned(t.param, 16) && aligned(t.grad, 16) && aligned(t.exp_avg, 16) &&
                aligned(t.exp_avg_sq, 16) && aligned(t.max_exp_avg_sq, 16) &&
                aligned(t.master, 16);
    t.chunk_begin = chunks;
    chunks += (t.numel + kAdamwChunk - 1) / kAdamwChunk;
  }
  return chunks;
}

AdamwPlan adamw_plan(const AdamwParams &p, int max_grid) {
  AdamwPlan plan{};
  int grid = max_grid < 1 ? 0 : max_grid;
  if (grid > 0 && p.n_chunks < grid) grid = p.n_chunks > 0 ? int(p.n_chunks) : 1;
  plan.grid = dim3(unsigned(grid));
  plan.block = dim3(kThreads);
  return plan;
}
