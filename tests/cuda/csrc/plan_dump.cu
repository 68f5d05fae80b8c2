// Prints the launch plans of our LayerNorm, softmax and causal conv1d backward kernels, one
// JSON object a line, for problems read from stdin: host code only (no device is touched),
// so the planning is testable on a machine without a GPU (tests/cuda/test_kernel_plans.py).
//   ln  rows n x_dtype w_dtype affine partials misalign_bytes row_pad sm_count
//   sm  rows n dtype dropout misalign_bytes row_pad
//   cv  batch dim seqlen width dtype channel_last misalign_bytes
// dtypes: 0 fp32, 1 fp16, 2 bf16. Pointers are fake, 256-byte aligned plus misalign_bytes;
// row strides are n + row_pad elements.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "../../../kernels/causal_conv1d/csrc/conv1d_bwd.h"
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
    } else {
      return 2;
    }
  }
  return 0;
}
