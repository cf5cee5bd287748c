// Requesting the weights a row-by-row kernel will read a few rows later (a software
// prefetch), shared by the float32 stored-weight kernels (stored_kernels_impl.h) and the int8
// ones (int8_kernels_x86.h). A token's weights stream from memory once, and without the
// requests the loads of the current rows wait longer: the 3B Q4_K append went from 184 to
// 135 ms (int8, AVX-512 VNNI) and from 242–250 to 188–226 ms (float32) (docs/performance.md).
// A prefetch never faults, past a matrix's end too.
//
// In an anonymous namespace, like the kernels that include it: each kernel family's file,
// compiled with its own instruction-set flags, keeps its own copy.
#pragma once
#include <cstdint>

namespace attnviz {
namespace {

// How many weight rows ahead (2 to 8 measured alike; 16 slower).
constexpr int64_t kPrefetchRows = 4;

// Requests the cache lines that hold the N bytes from p, kPrefetchRows rows of row_bytes
// on: each line once, from the call whose bytes start in it (N < 64: lines shared by calls).
template <int N>
inline void prefetch_ahead(const uint8_t* p, int64_t row_bytes) {
  const uint8_t* a = p + kPrefetchRows * row_bytes;
  if constexpr (N < 64) {
    if ((reinterpret_cast<uintptr_t>(a) & 63) < N) __builtin_prefetch(a);
  } else {
    for (int o = 0; o < N; o += 64) __builtin_prefetch(a + o);
    if constexpr (N % 64 != 0) __builtin_prefetch(a + N - 1);
  }
}

}  // namespace
}  // namespace attnviz
