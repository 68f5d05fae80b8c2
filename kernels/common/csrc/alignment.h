// Pointer alignment, for the host plans that pick vector accesses.
#pragma once

#include <cstdint>

// ptr is a multiple of `bytes` (a power of two).
inline bool aligned(const void *ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}
