"""Thirteenth session, call 1: when each block of the LayerNorm backward starts, finishes
its rows and its workspace row, and when ln_bwd_cols is released and ends (%globaltimer,
thread 0 of each block), for 4096x8192 and 16384x4096 bf16; standalone nvcc build of an
instrumented copy of kernels/layer_norm/csrc/layer_norm_bwd.cu.
  python3 call1_ts.py OUTDIR [--compile-only]"""
import subprocess, sys
from pathlib import Path

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
src = Path("kernels/layer_norm/csrc/layer_norm_bwd.cu").read_text()

def edit(s, old, new):
    assert s.count(old) == 1, (old, s.count(old))
    return s.replace(old, new)

probe = r'''
__device__ unsigned long long g_ts[6][1024];
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define TS(k) do { if (threadIdx.x == 0) g_ts[k][blockIdx.x + blockIdx.y * gridDim.x] = gtime(); } while (0)
namespace {
'''
src = edit(src, "\nnamespace {\n", probe)
src = edit(src, "  const rowpipe::StageRing<kStages, 2 * C> ring(smem, blockDim.x);\n",
           "  TS(0);\n  const rowpipe::StageRing<kStages, 2 * C> ring(smem, blockDim.x);\n")
src = edit(src, "  rowpipe::stream_rows<kStages>(g, int(p.rows), issue, process, init_columns);\n",
           "  rowpipe::stream_rows<kStages>(g, int(p.rows), issue, process, init_columns);\n  TS(1);\n")
src = edit(src, "                      p.ws + int64_t(blockIdx.x) * 2 * np);\n  }\n}\n",
           "                      p.ws + int64_t(blockIdx.x) * 2 * np);\n    __syncthreads();\n    TS(2);\n  }\n}\n")
src = edit(src, '  asm volatile("griddepcontrol.wait;" ::: "memory");\n',
           '  TS(3);\n  asm volatile("griddepcontrol.wait;" ::: "memory");\n  TS(4);\n')
src = edit(src, "    static_cast<W *>(which ? p.dbeta : p.dgamma)[col] = from_f<W>(total);\n  }\n}\n",
           "    static_cast<W *>(which ? p.dbeta : p.dgamma)[col] = from_f<W>(total);\n  }\n  TS(5);\n}\n")
Path("kernels/layer_norm/csrc/layer_norm_bwd_ts.cu").write_text(src)

main = r'''
#include "layer_norm_bwd_ts.cu"
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
__global__ void fill(__nv_bfloat16 *a, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    a[i] = __float2bfloat16(float(h & 0xffff) / 32768.f - 1.f);
  }
}
__global__ void fillf(float *a, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) a[i] = v;
}
// clean flush: read a buffer larger than L2
__global__ void flush(const float4 *a, size_t n, float *sink) {
  float s = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) s += a[i].x;
  if (s == 12345.f) *sink = s;
}
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t fl_n = (512u << 20) / 16; float4 *fl; float *sink;
  CK(cudaMalloc(&fl, fl_n * 16)); CK(cudaMalloc(&sink, 4)); CK(cudaMemset(fl, 0, fl_n * 16));
  const int shapes[2][2] = {{4096, 8192}, {16384, 4096}};
  for (auto &sh : shapes) {
    const int M = sh[0], N = sh[1];
    const size_t mn = size_t(M) * N;
    __nv_bfloat16 *x, *dy, *dx, *gm, *dg, *db; float *mean, *rstd, *ws;
    CK(cudaMalloc(&x, mn * 2)); CK(cudaMalloc(&dy, mn * 2)); CK(cudaMalloc(&dx, mn * 2));
    CK(cudaMalloc(&gm, N * 2)); CK(cudaMalloc(&dg, N * 2)); CK(cudaMalloc(&db, N * 2));
    CK(cudaMalloc(&mean, M * 4)); CK(cudaMalloc(&rstd, M * 4));
    fill<<<1024, 256>>>(x, mn, 1); fill<<<1024, 256>>>(dy, mn, 2); fill<<<64, 256>>>(gm, N, 3);
    fillf<<<64, 256>>>(mean, M, 0.f); fillf<<<64, 256>>>(rstd, M, 1.f);
    LnBwdParams p{}; p.rows = M; p.n = N; p.x_dtype = DType::kBFloat16; p.w_dtype = DType::kBFloat16;
    p.affine = true; p.x = x; p.dy = dy; p.dx = dx; p.gamma = gm; p.mean = mean; p.rstd = rstd;
    p.dgamma = dg; p.dbeta = db; p.x_row = p.dy_row = p.dx_row = N;
    LnBwdPlan plan = layer_norm_bwd_plan(p, true, sms);
    CK(cudaMalloc(&ws, size_t(plan.parts) * 2 * layer_norm_ws_row(N) * 4)); p.ws = ws;
    const int cols_blocks = 2 * ((N + 31) / 32);
    printf("== %dx%d bf16: grid %d block %d smem %zu, cols blocks %d\n", M, N, plan.parts, plan.block.x, plan.smem_bytes, cols_blocks);
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    const char *names[] = {"main_start", "rows_done", "ws_done", "cols_start", "cols_released", "cols_end"};
    std::vector<std::vector<double>> st(24);
    std::vector<double> ev;
    std::vector<double> last_rows_extra, last_rows_other;
    for (int rep = 0; rep < 40; ++rep) {
      flush<<<sms * 4, 512>>>(fl, fl_n, sink);
      CK(cudaEventRecord(a));
      CK(layer_norm_bwd_launch(p, plan, 0));
      CK(cudaEventRecord(b));
      CK(cudaDeviceSynchronize());
      float ms; CK(cudaEventElapsedTime(&ms, a, b));
      static unsigned long long h[6][1024];
      CK(cudaMemcpyFromSymbol(h, g_ts, sizeof(h)));
      if (rep < 10) continue;
      ev.push_back(ms * 1e3);
      unsigned long long t0 = ~0ull;
      for (int i = 0; i < plan.parts; ++i) t0 = std::min(t0, h[0][i]);
      for (int k = 0; k < 6; ++k) {
        const int nb = k < 3 ? plan.parts : cols_blocks;
        std::vector<double> v; for (int i = 0; i < nb; ++i) v.push_back((double(h[k][i]) - double(t0)) / 1e3);
        std::sort(v.begin(), v.end());
        st[k * 4 + 0].push_back(v.front()); st[k * 4 + 1].push_back(v[v.size() / 2]);
        st[k * 4 + 2].push_back(v[v.size() * 9 / 10]); st[k * 4 + 3].push_back(v.back());
      }
      // blocks that take one more row than the others (first_row = block): the first M % parts
      const int extra = M % plan.parts;
      double e = 0, o = 0; for (int i = 0; i < plan.parts; ++i) { double t = (double(h[1][i]) - double(t0)) / 1e3; if (i < extra) e = std::max(e, t); else o = std::max(o, t); }
      last_rows_extra.push_back(e); last_rows_other.push_back(o);
    }
    printf("events median %.2f us (30 samples; min %.2f)\n", med(ev), *std::min_element(ev.begin(), ev.end()));
    printf("%-14s %8s %8s %8s %8s   (us from the first main block's start; medians over samples)\n", "stamp", "min", "median", "p90", "max");
    for (int k = 0; k < 6; ++k) printf("%-14s %8.2f %8.2f %8.2f %8.2f\n", names[k], med(st[k*4]), med(st[k*4+1]), med(st[k*4+2]), med(st[k*4+3]));
    printf("rows_done, latest of the %d blocks with one more row: %.2f; of the others: %.2f\n", M % plan.parts, med(last_rows_extra), med(last_rows_other));
    CK(cudaFree(x)); CK(cudaFree(dy)); CK(cudaFree(dx)); CK(cudaFree(gm)); CK(cudaFree(dg)); CK(cudaFree(db));
    CK(cudaFree(mean)); CK(cudaFree(rstd)); CK(cudaFree(ws));
  }
  return 0;
}
'''
Path("kernels/layer_norm/csrc/ts_main.cu").write_text(main)
cmd = ["nvcc", "-std=c++17", "-O3", "--use_fast_math", "-gencode=arch=compute_90,code=sm_90",
       "-o", str(out / "ts_main"), "kernels/layer_norm/csrc/ts_main.cu"]
r = subprocess.run(cmd, capture_output=True, text=True)
print("nvcc", r.returncode, r.stderr[-3000:])
if r.returncode == 0 and "--compile-only" not in sys.argv:
    r = subprocess.run([str(out / "ts_main")], capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr[-2000:])
