// Integer products for quantized weights (the int8 arithmetic, core/engine/int8_product.h):
// the activation row quantized to int8 once per block, then each weight block's integers
// multiplied by the activation's integers, the scales applied once per block.
//
// The activation format. A row x of K values (K a whole number of the weight type's blocks)
// is cut into blocks of B values, B = 32 for the 32-element weight types (Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1) and 256 for the super-block types (Q4_K, Q5_K, Q6_K), as llama.cpp's Q8_0 and
// Q8_K activation blocks are. Block b's scale is d_b = max |x| over the block / 127 and each
// value is q = round(x / d_b) (half away from zero), so |q| ≤ 127 and x ≈ d_b·q. A block of
// zeros has d_b = 0 and q = 0. sums[g] is the sum of q over values [32g, 32g + 32), and
// dsums[g] that sum times its block's d: what the weight types with a min or an offset need
// (Σ (d·n + m)·x = d·Σ n·x + m·Σ x); sums16[h] is the sum over values [16h, 16h + 16) (Q6_K's
// offset, whose scales change every 16 values).
//
// Exactness: the integer sums are exact (int32, no saturation for any type's range: see
// int8_kernels_avx2.cpp); the float work per block is d_w·d_x·(integer sum) and, for types
// with a min, m·d_x·sums. So the result is Σ_b d_x,b·Σ_j w_j·q_j with every w_j the value
// `dequantize` gives, up to float rounding in those per-block products and the final sum.
//
// Letters: n weight rows of K values each, stored row_bytes apart from `rows`; x given as
// M activation rows (ActRows); y (M, n), rows ldy apart.
#pragma once
#include <cstdint>

#include "core/model/gguf_quant.h"

namespace attnviz::int8 {

// Whether the int8 arithmetic has kernels for `type` (the others keep float32 products).
bool supported(GgmlType type);
// The activation block B for a supported weight type: 32 or 256.
int act_block(GgmlType type);

// M rows of quantized activations, row i at q + i·K, d + i·(K / B), sums and dsums + i·(K / 32).
struct ActRows {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* sums = nullptr;
  const float* dsums = nullptr;
  const int16_t* sums16 = nullptr;  // row i at sums16 + i·(K / 16)
  int64_t K = 0;
};

// Quantizes x (K values) with block B into q[K], d[K / B], sums[K / 32] and, when not null,
// dsums[K / 32] and sums16[K / 16] (the rule above).
void quantize_row(const float* x, int64_t K, int B, int8_t* q, float* d, int32_t* sums, float* dsums = nullptr,
                  int16_t* sums16 = nullptr);

struct Kernels {
  const char* name;  // "portable", "avx2", "avxvnni", "avx512vnni"
  // y[i·ldy + r] = Σ_k x_i[k]·W_r[k] for r < n, i < M, 1 ≤ M ≤ kRows, x quantized with
  // act_block(type). Runs on the calling thread.
  void (*matvec)(GgmlType type, const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, int M, float* y,
                 int64_t ldy);
};

// The most activation rows one matvec call takes.
constexpr int kRows = 4;

const Kernels& portable_kernels();
#if defined(__x86_64__)
const Kernels& avx2_kernels();        // needs avx2, fma, f16c
const Kernels& avxvnni_kernels();     // needs those and avxvnni
const Kernels& avx512vnni_kernels();  // needs those and avx512f, avx512bw, avx512vl, avx512vnni
#endif

}  // namespace attnviz::int8
