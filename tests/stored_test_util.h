// Random stored matrices and activations for the tests of products with stored weights
// (test_stored_product.cpp, test_int8_product.cpp).
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/model/gguf_quant.h"
#include "core/model/stored_rows.h"

namespace attnviz {

// A finite fp16 with a random sign and mantissa and an exponent field in [lo, hi]
// (0: zero or subnormal; 15: [1, 2)).
inline uint16_t random_half(std::mt19937& rng, int lo, int hi) {
  std::uniform_int_distribution<int> e(lo, hi), m(0, 1023), s(0, 1);
  return static_cast<uint16_t>(s(rng) << 15 | e(rng) << 10 | m(rng));
}

// `rows` rows of `cols` random values of type t, valid blocks: random bytes with every fp16
// field finite. The buffer is exactly the matrix's size, so AddressSanitizer catches any
// read past its end.
struct Matrix {
  std::shared_ptr<std::vector<uint8_t>> bytes;
  StoredRows w;
};

inline Matrix random_matrix(GgmlType t, int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  Matrix m;
  m.w.type = t;
  m.w.rows = rows;
  m.w.cols = cols;
  m.w.row_bytes = stored_row_bytes(t, cols, "test matrix");
  m.w.origin = std::string("test ") + ggml_type_info(t).name;
  m.bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(rows * m.w.row_bytes));
  std::vector<uint8_t>& b = *m.bytes;
  auto put16 = [&](size_t at, uint16_t v) {
    b[at] = v & 0xff;
    b[at + 1] = v >> 8;
  };
  if (t == GgmlType::F32) {
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < b.size(); i += 4) {
      const float v = nd(rng);
      std::memcpy(&b[i], &v, 4);
    }
  } else if (t == GgmlType::F16) {
    for (size_t i = 0; i < b.size(); i += 2) put16(i, random_half(rng, 0, 20));  // subnormals included
  } else if (t == GgmlType::BF16) {
    std::uniform_int_distribution<int> e(115, 135), mant(0, 127), s(0, 1);
    for (size_t i = 0; i < b.size(); i += 2) put16(i, static_cast<uint16_t>(s(rng) << 15 | e(rng) << 7 | mant(rng)));
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
    const int bb = ggml_type_info(t).block_bytes;
    for (size_t blk = 0; blk < b.size(); blk += bb)
      for (int at : ggml_scale_fields(t)) put16(blk + at, random_half(rng, 8, 16));
    if (t == GgmlType::MXFP4) {  // E8M0 exponents around 1 (2^−9 … 2^9): no product overflows
      std::uniform_int_distribution<int> e(118, 136);
      for (size_t blk = 0; blk < b.size(); blk += bb) b[blk] = static_cast<uint8_t>(e(rng));
    }
  }
  m.w.data = b.data();
  m.w.keep = m.bytes;
  return m;
}

// Rows of x (M, K), ldx apart; the padding between rows is NaN, so a kernel that reads past
// K poisons its result.
inline std::vector<float> random_x(int64_t M, int64_t K, int64_t ldx, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(M * ldx), std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) x[i * ldx + k] = nd(rng);
  return x;
}

}  // namespace attnviz
