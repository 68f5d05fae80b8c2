// Cross entropy forward and backward with each row of logits read once: a row (or, for a
// long row, a cluster of CTAs each holding a slice of it) is copied into shared memory,
// its statistics reduced on chip and merged across the cluster through distributed shared
// memory, and dlogits computed from the copy. The compulsory bytes (logits read once,
// dlogits written once) are all this moves; the streaming kernel (cross_entropy_rows.cu)
// reads every row twice.
//
// Ownership: each thread copies (cp.async) and later reads only its own 16-byte vectors,
// so no barrier guards them (cp.async.wait_group makes a thread's copies visible to it).
// The cluster's merge: each CTA publishes its (max, sum, sum x, target logit) in its own
// shared memory, the cluster barrier orders them, thread 0 of every CTA merges all ranks
// in rank order (the same bits in every CTA), and no CTA leaves before every peer has
// read its partial.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../../common/csrc/dependent_launch.cuh"
#include "../../common/csrc/row_pipeline.cuh"
#include "cross_entropy.h"
#include "cross_entropy_launchers.h"
#include "cross_entropy_row.cuh"

namespace {

// Commit groups of a CTA's copies when a cluster holds the row: the reduction starts when
// the first has landed, so the cluster's barrier, which every CTA of the row waits at,
// comes sooner after the last. One group without a cluster, where 3 CTAs an SM already
// overlap one's reduction with the others' copies (groups measured slower there).
constexpr int kClusterGroups = 8;

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_size() {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
// Split cluster barrier: arrive (release: this thread's writes and reads before it are
// ordered before the peers' wait), then wait (acquire). Every thread of every CTA takes
// part.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The float4 at shared address `a` of this CTA, read from the same place in CTA `rank`.
__device__ __forceinline__ float4 ld_peer(unsigned a, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// Waits until this thread's copy groups 0..gi have landed (of kG committed); gi is a
// constant once the caller's loop is unrolled.
template <int kG>
__device__ __forceinline__ void wait_groups_left(int gi) {
  static_assert(kG >= 1 && kG <= 8, "wait_group takes an immediate");
  switch (kG - 1 - gi) {
    case 7: rowpipe::cp_async_wait<7>(); break;
    case 6: rowpipe::cp_async_wait<6>(); break;
    case 5: rowpipe::cp_async_wait<5>(); break;
    case 4: rowpipe::cp_async_wait<4>(); break;
    case 3: rowpipe::cp_async_wait<3>(); break;
    case 2: rowpipe::cp_async_wait<2>(); break;
    case 1: rowpipe::cp_async_wait<1>(); break;
    default: rowpipe::cp_async_wait<0>(); break;
  }
}

// One row per cluster; CTA `rank` holds vectors [rank * slice_vecs, + slice_vecs) of it.
// kGroups: commit groups of its copies (1 without a cluster; kClusterGroups with one).
template <typename T, bool kCap, int kGroups>
__global__ void __launch_bounds__(kResidentThreads)
    ce_resident_kernel(CrossEntropyParams p, int slice_vecs) {
  constexpr int kN = 16 / int(sizeof(T));
  extern __shared__ __align__(16) unsigned char row_smem[];
  __shared__ float4 part;    // this CTA's (m, s, sx, target logit or NaN)
  __shared__ float4 merged;  // the cluster's, for this CTA's threads
  const unsigned C = cluster_size(), rank = cluster_rank();
  const int64_t row = blockIdx.x / C;
  const int vecs = p.vocab / kN;
  const int v0 = int(rank) * slice_vecs;
  const int mine = max(0, min(vecs - v0, slice_vecs));
  const T *x = static_cast<const T *>(p.logits) + row * p.logits_row + int64_t(v0) * kN;
  T *dx = static_cast<T *>(p.dlogits) + row * p.dlogits_row + int64_t(v0) * kN;
  const int64_t y = ce::target_of(p, row);
  float *row_out = p.reduction == CeReduction::kNone ? p.loss : p.row_loss;

  if (y == p.ignore_index) {  // no loss, a zero gradient slice; no CTA of it syncs
    for (int i = threadIdx.x; i < mine; i += kResidentThreads)
      __stcs(reinterpret_cast<uint4 *>(dx + i * kN), make_uint4(0, 0, 0, 0));
    if (rank == 0 && threadIdx.x == 0) row_out[row] = 0.f;
    wait_for_primary();  // not done before the count: the loss kernel relies on that
    return;
  }
  const unsigned smem = rowpipe::smem_addr(row_smem);
  const bool sum_x = p.label_smoothing != 0.f;
  const float x0 = sum_x ? ce::first_logit<T, kCap>(
      static_cast<const T *>(p.logits) + row * p.logits_row, p.softcap) : 0.f;
  ce::Partial a;
  if constexpr (kGroups == 1) {
    for (int i = threadIdx.x; i < mine; i += kResidentThreads)
      rowpipe::cp_async16(smem + i * 16, x + i * kN, 16);
    rowpipe::cp_async_commit();
    rowpipe::cp_async_wait<0>();
    for (int i = threadIdx.x; i < mine; i += kResidentThreads) {
      float v[kN];
      ce::unpack<T, kN>(rowpipe::lds16(smem + i * 16), v);
      if constexpr (kCap) ce::cap_all(v, p.softcap);
      ce::accumulate(a, v, sum_x, x0);
    }
  } else {
    // The copies in kGroups commit groups, reduced group by group as they land: the
    // reduction of a thread's first vectors overlaps the flight of its last (the same
    // vectors in the same order as one group takes them).
    // vectors a thread, at most
    const int per = (slice_vecs + kResidentThreads - 1) / kResidentThreads;
    const int per_group = (per + kGroups - 1) / kGroups;
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {
      for (int k = gi * per_group; k < min(per, (gi + 1) * per_group); ++k) {
        const int i = int(threadIdx.x) + k * kResidentThreads;
        if (i < mine) rowpipe::cp_async16(smem + i * 16, x + i * kN, 16);
      }
      rowpipe::cp_async_commit();
    }
#pragma unroll
    for (int gi = 0; gi < kGroups; ++gi) {
      wait_groups_left<kGroups>(gi);
      for (int k = gi * per_group; k < min(per, (gi + 1) * per_group); ++k) {
        const int i = int(threadIdx.x) + k * kResidentThreads;
        if (i >= mine) break;
        float v[kN];
        ce::unpack<T, kN>(rowpipe::lds16(smem + i * 16), v);
        if constexpr (kCap) ce::cap_all(v, p.softcap);
        ce::accumulate(a, v, sum_x, x0);
      }
    }
  }
  a = ce::block_merge(a);
  const bool in_range = y >= 0 && y < p.vocab;
  const int owner = in_range ? int(y / kN) / slice_vecs : -1;
  if (threadIdx.x == 0) {
    float xy[1] = {NAN};
    if (owner == int(rank)) {  // copied by another thread: block_merge's barrier ordered it
      xy[0] = to_f(reinterpret_cast<const T *>(row_smem)[y - int64_t(v0) * kN]);
      if constexpr (kCap) ce::cap_all(xy, p.softcap);
    }
    part = make_float4(a.m, a.s, a.sx, xy[0]);
  }
  if (C > 1) {
    cluster_arrive();
    cluster_wait();  // every CTA's part written
    if (threadIdx.x == 0) {
      const unsigned mine_part = rowpipe::smem_addr(&part);
      ce::Partial t;
      float xy = NAN;
      for (unsigned r = 0; r < C; ++r) {
        const float4 q = ld_peer(mine_part, r);
        ce::merge(t.m, t.s, q.x, q.y);
        t.sx += q.z;
        if (int(r) == owner) xy = q.w;
      }
      merged = make_float4(t.m, t.s, t.sx, xy);
    }
    cluster_arrive();  // done reading the peers' parts; each waits for this before leaving
  } else if (threadIdx.x == 0) {
    merged = part;
  }
  __syncthreads();
  const float4 mg = merged;
  wait_for_primary();  // the count, for a mean
  float loss;
  const ce::RowGrad r =
      ce::row_grad(p, row, ce::Partial{mg.x, mg.y, mg.z}, mg.w, x0, in_range, &loss);
  if (rank == 0 && threadIdx.x == 0) row_out[row] = loss;

  for (int i = threadIdx.x; i < mine; i += kResidentThreads) {
    float v[kN], g[kN];
    ce::unpack<T, kN>(rowpipe::lds16(smem + i * 16), v);
    ce::grad_of<kN, kCap>(r, v, int64_t(v0 + i) * kN, y, p.softcap, g);
    __stcs(reinterpret_cast<uint4 *>(dx + i * kN), ce::pack<T, kN>(g));
  }
  if (C > 1) cluster_wait();
}

}  // namespace

template <typename T, bool kCap>
cudaError_t ce_job::resident(const CrossEntropyParams &p, const CrossEntropyPlan &plan,
                             cudaStream_t stream) {
  auto *kernel = plan.cluster > 1 ? &ce_resident_kernel<T, kCap, kClusterGroups>
                                  : &ce_resident_kernel<T, kCap, 1>;
  // per call: the attribute belongs to the current device
  const cudaError_t attr = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSliceMax);
  if (attr != cudaSuccess) return attr;
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = unsigned(plan.cluster);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(p.rows * plan.cluster));
  cfg.blockDim = dim3(kResidentThreads);
  cfg.dynamicSmemBytes = size_t(plan.slice_vecs) * 16;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = plan.count ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, kernel, p, plan.slice_vecs);
}

template cudaError_t ce_job::resident<float, false>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::resident<float, true>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::resident<__half, false>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::resident<__half, true>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::resident<__nv_bfloat16, false>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
template cudaError_t ce_job::resident<__nv_bfloat16, true>(const CrossEntropyParams &, const CrossEntropyPlan &, cudaStream_t);
