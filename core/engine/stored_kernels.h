// The kernel families behind stored_product (core/engine/stored_product.h): the same two
// kernels written once (stored_kernels_impl.h) and compiled three times, for plain C++
// (stored_kernels_portable.cpp), AVX2 + FMA + F16C (stored_kernels_avx2.cpp) and AVX-512
// (stored_kernels_avx512.cpp), each file with its own compiler flags (core/CMakeLists.txt).
// stored_product.cpp picks one family at run time from what the CPU supports.
//
// Letters: n weight rows of K values each (K a whole number of the type's blocks), stored
// row_bytes apart from `rows`; x (M, K) float32, rows ldx apart; y (M, n), rows ldy apart.
#pragma once
#include <cstdint>

#include "core/model/gguf_quant.h"

namespace attnviz::stored {

struct Kernels {
  const char* name;  // "portable", "avx2", "avx512"
  // y (M, n) = x (M, K) · Wᵀ for 1 ≤ M ≤ kMatvecRows: each block decoded in registers and
  // multiplied by the M rows of x there. Runs on the calling thread.
  void (*matvec)(GgmlType type, const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, const float* x,
                 int64_t ldx, int M, float* y, int64_t ldy);
  // W (n, K) decoded into dst (n, K), rows ld floats apart: the values `dequantize` gives.
  void (*decode)(GgmlType type, const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, float* dst, int64_t ld);
};

// The most rows of x one matvec call takes.
constexpr int kMatvecRows = 4;

const Kernels& portable_kernels();
#if defined(__x86_64__)
const Kernels& avx2_kernels();    // needs avx2, fma, f16c
const Kernels& avx512_kernels();  // needs avx512f, avx512bw, avx512vl, avx512dq (and the above)
#endif

}  // namespace attnviz::stored
