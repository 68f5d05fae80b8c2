// The tiling of the row kernels (row_pipeline.cuh) as host and device code share it: the
// thread, shared-memory and ring budgets of an SM, a row's group shape and the persistent
// grid. No device code: the host planning includes it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace rowpipe {

constexpr int kMaxThreads = 1024;           // threads of a row group and of a block
constexpr int kMaxWarps = kMaxThreads / 32;
constexpr int kThreadsPerSm = 1024;         // at <= 64 registers a thread (launch bounds)
constexpr int kSmemPerSm = 216 * 1024;      // ring budget of an SM (228 KiB less reserves)

// Stages of a ring whose stage takes `bytes` per thread, next to `fixed` other bytes a
// thread: as many as the budget gives an SM's threads, 2 to 4 (3 rows in flight a group
// keep an SM's copies going; more only take shared memory).
constexpr __host__ __device__ int ring_stages(int bytes, int fixed = 0,
                                              int threads_per_sm = kThreadsPerSm) {
  const int s = (kSmemPerSm / threads_per_sm - fixed) / bytes;
  return s < 2 ? 2 : s > 4 ? 4 : s;
}

// Bytes of a ring of `stages` stages, each with vec_slots 16-byte slots per thread and one
// 8-byte slot per warp, rounded up to 16 (host and device agree on it).
constexpr __host__ __device__ size_t ring_bytes(int stages, int threads, int vec_slots) {
  return (size_t(stages) * threads * vec_slots * 16 + size_t(stages) * (threads / 32) * 8 +
          15) / 16 * 16;
}

// The tiling of a row kernel over whole rows of n elements in 16-byte vectors of E
// elements, at most max_per_thread elements a thread: TPR the smallest power of two
// (>= 32) that holds the row, C vectors a thread, blocks of max(TPR, 512) threads.
constexpr int kBlockThreads = 512;

struct RowShape {
  int tpr, chunks, threads;
};

inline int pow2_at_least(int64_t v) {
  int c = 1;
  while (c < v) c *= 2;
  return c;
}

// Whether `rows` rows of n elements fit (the kernels' other paths take longer rows, and
// more than 2^30 rows: row indices here are int).
inline bool fits_rows(int64_t rows, int64_t n, int max_per_thread) {
  return rows < (int64_t(1) << 30) && n <= int64_t(kMaxThreads) * max_per_thread;
}

inline RowShape row_shape(int64_t n, int elems_per_vec, int max_per_thread) {
  RowShape r{};
  const int64_t per = (n + max_per_thread - 1) / max_per_thread;
  r.tpr = pow2_at_least(per < 32 ? 32 : per);
  const int64_t chunk = int64_t(r.tpr) * elems_per_vec;
  r.chunks = pow2_at_least((n + chunk - 1) / chunk);
  r.threads = r.tpr > kBlockThreads ? r.tpr : kBlockThreads;
  return r;
}

// A persistent grid: as many blocks as are resident at once (threads and shared memory
// permitting), at most one per group of rows.
inline int resident_grid(int64_t rows, const RowShape &r, size_t smem_per_block, int sm_count,
                         int threads_per_sm = kThreadsPerSm) {
  const int by_threads = threads_per_sm / r.threads;
  const int by_smem = int((228 * 1024) / (smem_per_block + 1024));  // 1 KiB reserved a block
  int per_sm = by_threads < by_smem ? by_threads : by_smem;
  if (per_sm < 1) per_sm = 1;
  const int groups = r.threads / r.tpr;
  const int64_t need = (rows + groups - 1) / groups;
  const int64_t cap = int64_t(sm_count < 1 ? 1 : sm_count) * per_sm;
  return int(need < cap ? need : cap);
}

}  // namespace rowpipe
