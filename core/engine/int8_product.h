// The arithmetic of products with quantized weights: float32 (each weight decoded to the
// value `dequantize` gives, the activation float32: exact up to the order of additions) or
// int8 (the activation row quantized to int8 once per block, integer dot products with the
// weights' integers: int8_kernels.h says how, and how far the result is from float32's).
//
// The choice is the process's, like the kernel family (stored_product.h): the CLI sets it
// from --arith, the GUI from its menu; every later product follows it. Weights stored as
// F32, F16, BF16, Q2_K or Q3_K, and float32 matrices, keep float32 products in both.
// Engines clear their KV cache when the choice has changed since their last run.
#pragma once
#include <cstdint>
#include <string>

#include "core/aligned.h"
#include "core/engine/int8_kernels.h"
#include "core/model/model.h"
#include "core/model/stored_rows.h"

namespace attnviz {

enum class Arith { F32, Int8 };

const char* arith_name(Arith a);  // "f32", "int8"
// "f32" or "int8"; throws a usage Error naming `what` (the option) otherwise.
Arith parse_arith(const std::string& s, const std::string& what);

// The process's arithmetic (f32 at start, or ATTNVIZ_ARITH when it says f32 or int8).
Arith arith();
void set_arith(Arith a);

// Whether products with `w` take the int8 path under `a`.
bool uses_int8(Arith a, const StoredRows& w);
// What a CPU pass of a model with weights `w` runs under `a`: int8 when `a` is and some
// matrix is stored in a type with int8 kernels, else f32.
Arith arith_for(const ModelWeights& w, Arith a);

// The most rows of x int8_product takes (appending: a few tokens at a time). stored_product
// multiplies more rows in the same arithmetic through float32 products of the rounded
// activations (int8_round_rows).
constexpr int64_t kInt8Rows = int8::kRows;

// y (M, n) = x (M, K) · W[r0 : r0 + n]ᵀ in int8 arithmetic with the integer kernels, for
// 1 ≤ M ≤ kInt8Rows (w.type one int8::supported takes). Runs on the calling thread's OpenMP
// team, like stored_product.
void int8_product(const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y, int64_t ldy, int64_t r0,
                  int64_t n);

// x (M, K) with each value replaced by its int8 value d·q (the block rule of
// int8_kernels.h for w's type) into out (M, K), rows K apart.
void int8_round_rows(const float* x, int64_t M, int64_t ldx, const StoredRows& w, FloatBuf& out);

// The int8 kernel family this process runs: "avxvnni", "avx512vnni", "avx2" or "portable".
const char* int8_kernel_name();
// Forces one (one of those names, "" for the CPU's best); false, changing nothing, when the
// CPU cannot run it. Not thread-safe: call it before products run.
bool set_int8_kernel(const char* name);

}  // namespace attnviz
