// Prints the launch plans of our LayerNorm, softmax, causal conv1d backward, cross-entropy
// and AdamW kernels, one JSON object a line, for problems read from stdin: host code only
// (no device is touched), so the planning is testable on a machine without a GPU
// (tests/cuda/test_kernel_plans.py).
//   ln  rows n x_dtype w_dtype affine partials misalign_bytes row_pad sm_count
//   sm  rows n dtype dropout misalign_bytes row_pad
//   cv  batch dim seqlen width dtype channel_last misalign_bytes
//   ce  rows vocab dtype reduction misalign_bytes row_pad clusters
//   aw  max_grid amsgrad master tensors, then per tensor: numel field misalign_bytes
// dtypes: 0 fp32, 1 fp16, 2 bf16; reductions: 0 mean, 1 sum, 2 none. Pointers are fake,
// 256-byte aligned plus misalign_bytes (ce: the logits; aw: the pointer `field` of the
// tensor, 0 param, 1 grad, 2 exp_avg, 3 exp_avg_sq, 4 max_exp_avg_sq, 5 master, where the
// step has it); row strides are n + row_pad elements.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../../../kernels/adamw/csrc/adamw.h"
#include "../../../kernels/causal_conv1d/csrc/conv1d_bwd.h"
#include "../../../kernels/cross_entropy/csrc/cross_entropy.h"
#include "../../../kernels/layer_norm/csrc/layer_norm_bwd.h"
#include "../../../kernels/softmax/csrc/softmax_bwd.h"

int main() {
  char op[8];
  while (std::scanf("%7s", op) == 1) {
    long long rows;
    int n, misalign, pad;
    if (std::strcmp(op, "ln") == 0) {
      int xd, wd, affine, partials, sms;
      if (std::scanf("%lld %d %d %d %d %d %d %d %d", &rows, &n, &xd, &wd, &affine, &partials,
                     &misalign, &pad, &sms) != 9)
        return 2;
      LnBwdParams p{};
      p.rows = rows;
      p.n = n;
      p.x_dtype = DType(xd);
      p.w_dtype = DType(wd);
      p.affine = affine != 0;
      void *base = reinterpret_cast<void *>(uintptr_t(1) << 20);
      void *off = reinterpret_cast<void *>((uintptr_t(1) << 20) + misalign);
      p.x = off;
      p.dy = base;
      p.dx = base;
      p.gamma = affine ? base : nullptr;
      p.x_row = p.dy_row = p.dx_row = n + pad;
      const LnBwdPlan q = layer_norm_bwd_plan(p, partials != 0, sms);
      std::printf("{\"tpr\": %d, \"chunks\": %d, \"streamed\": %d, \"vectorized\": %d, "
                  "\"piped\": %d, \"parts\": %d, \"smem\": %zu, \"grid\": %u, \"block\": %u, "
                  "\"ws_row\": %d}\n",
                  q.tpr, q.chunks, int(q.streamed), int(q.vectorized), int(q.piped), q.parts,
                  q.smem_bytes, q.grid.x, q.block.x, layer_norm_ws_row(n));
    } else if (std::strcmp(op, "sm") == 0) {
      int dt, drop;
      if (std::scanf("%lld %d %d %d %d %d", &rows, &n, &dt, &drop, &misalign, &pad) != 6)
        return 2;
      SoftmaxBwdParams p{};
      p.rows = rows;
      p.n = n;
      p.dtype = DType(dt);
      p.dropout = drop != 0;
      p.scale = 1.f;
      void *base = reinterpret_cast<void *>(uintptr_t(1) << 20);
      p.y = reinterpret_cast<void *>((uintptr_t(1) << 20) + misalign);
      p.dy = base;
      p.dx = base;
      p.mask = drop ? static_cast<const uint8_t *>(base) : nullptr;
      p.y_row = p.dy_row = p.dx_row = p.mask_row = n + pad;
      const SoftmaxBwdPlan q = softmax_bwd_plan(p);
      std::printf("{\"warp_per_row\": %d, \"vectorized\": %d, \"streamed\": %d, \"split\": %d, "
                  "\"chunks\": %d, \"grid\": %u, \"block\": %u}\n",
                  int(q.warp_per_row), int(q.vectorized), int(q.streamed), int(q.split),
                  q.chunks, q.grid.x, q.block.x);
    } else if (std::strcmp(op, "cv") == 0) {
      long long dim, seqlen;
      int width, dt, last;
      if (std::scanf("%lld %lld %lld %d %d %d %d", &rows, &dim, &seqlen, &width, &dt, &last,
                     &misalign) != 7)
        return 2;
      ConvBwdParams p{};
      p.batch = int(rows);
      p.dim = int(dim);
      p.seqlen = int(seqlen);
      p.width = width;
      p.x_dtype = DType(dt);
      p.w_dtype = DType::kFloat32;
      void *base = reinterpret_cast<void *>(uintptr_t(1) << 20);
      p.x = reinterpret_cast<void *>((uintptr_t(1) << 20) + misalign);
      p.dout = base;
      p.dx = base;
      // contiguous (batch, dim, seqlen) or (batch, seqlen, dim) storage
      const int64_t t = last ? dim : 1, d = last ? 1 : seqlen, b = dim * seqlen;
      p.x_b = p.dout_b = p.dx_b = b;
      p.x_d = p.dout_d = p.dx_d = d;
      p.x_t = p.dout_t = p.dx_t = t;
      const ConvBwdPlan q = conv1d_bwd_plan(p);
      std::printf("{\"channel_first\": %d, \"vectorized\": %d, \"parts\": %d, \"grid\": [%u, %u, %u], "
                  "\"block\": %u, \"seg_len\": %d, \"tiles_per_span\": %d}\n",
                  int(q.channel_first), int(q.vectorized), q.parts, q.grid.x, q.grid.y,
                  q.grid.z, q.block.x, q.seg_len, q.tiles_per_span);
    } else if (std::strcmp(op, "ce") == 0) {
      int dt, red, clusters;
      if (std::scanf("%lld %d %d %d %d %d %d", &rows, &n, &dt, &red, &misalign, &pad,
                     &clusters) != 7)
        return 2;
      CrossEntropyParams p{};
      p.rows = rows;
      p.vocab = n;
      p.dtype = DType(dt);
      p.reduction = CeReduction(red);
      p.logits = reinterpret_cast<void *>((uintptr_t(1) << 20) + misalign);
      p.dlogits = reinterpret_cast<void *>(uintptr_t(1) << 20);
      p.logits_row = p.dlogits_row = int64_t(n) + pad;
      const CrossEntropyPlan q = cross_entropy_plan(p, clusters != 0);
      std::printf("{\"count\": %d, \"loss\": %d, \"vectorized\": %d, \"resident\": %d, "
                  "\"cluster\": %d, \"slice_vecs\": %d, \"grid\": %u, \"block\": %u}\n",
                  int(q.count), int(q.loss), int(q.vectorized), int(q.resident), q.cluster,
                  q.slice_vecs, q.grid.x, q.block.x);
    } else if (std::strcmp(op, "aw") == 0) {
      int max_grid, ams, master, count;
      if (std::scanf("%d %d %d %d", &max_grid, &ams, &master, &count) != 4 || count < 0)
        return 2;
      std::vector<AdamwTensor> table(count);
      for (AdamwTensor &t : table) {
        long long numel;
        int field;
        if (std::scanf("%lld %d %d", &numel, &field, &misalign) != 3) return 2;
        // as the binding fills an entry: the optional pointers null where the step has none
        char *base = reinterpret_cast<char *>(uintptr_t(1) << 20);
        void *ptrs[6] = {base, base, base, base, ams ? base : nullptr, master ? base : nullptr};
        if (field >= 0 && field < 6 && ptrs[field]) ptrs[field] = base + misalign;
        t = AdamwTensor{};
        t.param = ptrs[0];
        t.grad = ptrs[1];
        t.exp_avg = static_cast<float *>(ptrs[2]);
        t.exp_avg_sq = static_cast<float *>(ptrs[3]);
        t.max_exp_avg_sq = static_cast<float *>(ptrs[4]);
        t.master = static_cast<float *>(ptrs[5]);
        t.numel = numel;
      }
      AdamwParams p{};
      p.n_tensors = count;
      p.n_chunks = adamw_chunk_table(table.data(), count);
      p.amsgrad = ams != 0;
      p.master = master != 0;
      const AdamwPlan q = adamw_plan(p, max_grid);
      std::printf("{\"n_chunks\": %lld, \"grid\": %u, \"block\": %u, \"chunk_begin\": [",
                  static_cast<long long>(p.n_chunks), q.grid.x, q.block.x);
      for (int i = 0; i < count; ++i)
        std::printf("%s%lld", i ? ", " : "", static_cast<long long>(table[i].chunk_begin));
      std::printf("], \"aligned\": [");
      for (int i = 0; i < count; ++i) std::printf("%s%d", i ? ", " : "", table[i].aligned);
      std::printf("]}\n");
    } else {
      return 2;
    }
  }
  return 0;
}
