// Element types the kernels take, shared by every kernel folder's params header (no torch).
#pragma once

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// Bytes of one element.
constexpr int elem_size(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }
