// Matrix products that read weights where they lie (core/model/stored_rows.h): the blocks of
// a quantized, F16 or BF16 matrix are decoded as they are used, activations stay float32.
//
// The result is what the float32 product with the decoded matrix gives, up to the order of
// additions (each weight decodes to exactly the value `dequantize` gives).
//
// Two schemes, by the number of rows of x:
//   - few rows (appending a token): a matrix–vector kernel decodes each block in registers
//     and multiplies it by x there, the weight rows split over the OpenMP threads;
//   - many rows (a full pass): panels of weight rows are decoded into a small cache-resident
//     float32 buffer and multiplied by the existing fast product (BLAS or Eigen).
// The kernels are vectorised for AVX-512 and AVX2 with a portable fallback, chosen once at
// run time from the CPU (so one binary runs on any x86-64 CPU).
#pragma once
#include <cstdint>

#include "core/model/model.h"
#include "core/model/stored_rows.h"

namespace attnviz {

// y (M, n) = x (M, K) · W[r0 : r0 + n]ᵀ with W = w (rows, K = w.cols). x's rows are ldx floats
// apart, y's ldy. n < 0: every row from r0. Runs on the calling thread's OpenMP team.
void stored_product(const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y, int64_t ldy,
                    int64_t r0 = 0, int64_t n = -1);

// y = x · W (+ b) for a linear layer's Weight (model.h): float32 through ops.h's linear, or
// read where the file stores it (stored_product; llama's q/k rows reordered back to Hugging
// Face's order through row_of_col).
void linear(const Mat& x, const Weight& w, const Vec& b, Mat& y);
// y (rows, n) = x (rows, C) · Wt[r0 : r0 + n]ᵀ for a table's Weight (V, C) (the unembedding).
void linear_bt(const Mat& x, const Weight& wt, Eigen::Ref<Mat> y, Eigen::Index r0 = 0, Eigen::Index n = -1);

// The kernel family this process runs: "avx512", "avx2" or "portable".
const char* stored_kernel_name();

// Forces a kernel family (tests compare all three on one CPU): "avx512", "avx2",
// "portable", or "" for the CPU's best. Returns false, changing nothing, when the CPU
// cannot run the one asked for. Not thread-safe: call it before products run.
bool set_stored_kernel(const char* name);

}  // namespace attnviz
