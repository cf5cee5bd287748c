// Dequantization of every supported GGUF type against blocks whose values were worked out by
// hand from the block layouts (llama.cpp's ggml-common.h / ggml-quants.c), and against a
// per-element restatement of each layout (element index → the bytes and bits it reads),
// written independently of the decoder's loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "core/model/gguf_quant.h"
#include "core/model/safetensors.h"

namespace attnviz {
namespace {

// fp16 bit patterns used below.
constexpr uint16_t kOne = 0x3C00, kHalf = 0x3800, kQuarter = 0x3400, kMinusOne = 0xBC00;

struct Block {
  std::vector<uint8_t> b;
  explicit Block(size_t n, uint8_t fill = 0) : b(n, fill) {}
  void h(size_t at, uint16_t v) {
    b[at] = v & 0xff;
    b[at + 1] = v >> 8;
  }
};

std::vector<float> decode(GgmlType t, const Block& blk, int n) {
  EXPECT_EQ(blk.b.size() % ggml_type_info(t).block_bytes, 0u);
  std::vector<float> y(n, -999.f);
  dequantize(t, blk.b.data(), n, y.data());
  return y;
}

TEST(GgufQuant, TypeTable) {
  const struct { GgmlType t; int elems, bytes; } want[] = {
      {GgmlType::F32, 1, 4},      {GgmlType::F16, 1, 2},      {GgmlType::BF16, 1, 2},     {GgmlType::Q8_0, 32, 34},
      {GgmlType::Q4_0, 32, 18},   {GgmlType::Q4_1, 32, 20},   {GgmlType::Q5_0, 32, 22},   {GgmlType::Q5_1, 32, 24},
      {GgmlType::Q2_K, 256, 84},  {GgmlType::Q3_K, 256, 110}, {GgmlType::Q4_K, 256, 144}, {GgmlType::Q5_K, 256, 176},
      {GgmlType::Q6_K, 256, 210}, {GgmlType::MXFP4, 32, 17},
  };
  for (const auto& w : want) {
    EXPECT_EQ(ggml_type_info(w.t).block_elems, w.elems) << ggml_type_info(w.t).name;
    EXPECT_EQ(ggml_type_info(w.t).block_bytes, w.bytes) << ggml_type_info(w.t).name;
  }
  ASSERT_NE(ggml_type_info(23u), nullptr);
  EXPECT_STREQ(ggml_type_info(23u)->name, "IQ4_XS");
  EXPECT_FALSE(ggml_type_info(23u)->supported());
  EXPECT_EQ(ggml_type_info(4u), nullptr);  // a removed id
  EXPECT_EQ(ggml_type_info(999u), nullptr);
  float y[32];
  const uint8_t zeros[64] = {};
  EXPECT_THROW(dequantize(static_cast<GgmlType>(23), zeros, 32, y), std::logic_error);
  EXPECT_THROW(dequantize(static_cast<GgmlType>(999), zeros, 32, y), std::logic_error);
}

TEST(GgufQuant, F32F16BF16) {
  Block f(8);
  const float a = 1.5f, b = -0.0625f;
  std::memcpy(f.b.data(), &a, 4);
  std::memcpy(f.b.data() + 4, &b, 4);
  EXPECT_EQ(decode(GgmlType::F32, f, 2), (std::vector<float>{1.5f, -0.0625f}));

  Block h(10);
  h.h(0, 0x3C00), h.h(2, 0xC000), h.h(4, 0x7BFF), h.h(6, 0x0001), h.h(8, 0x3555);
  EXPECT_EQ(decode(GgmlType::F16, h, 5), (std::vector<float>{1.f, -2.f, 65504.f, 5.9604644775390625e-08f, 0.333251953125f}));

  Block bf(6);
  bf.h(0, 0x3F80), bf.h(2, 0xC040), bf.h(4, 0x4049);
  EXPECT_EQ(decode(GgmlType::BF16, bf, 3), (std::vector<float>{1.f, -3.f, 3.140625f}));
}

TEST(GgufQuant, Q8_0) {
  Block k(34);
  k.h(0, kQuarter);
  for (int j = 0; j < 32; ++j) k.b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  const auto y = decode(GgmlType::Q8_0, k, 32);
  EXPECT_EQ(y[0], -32.f);   // -128 · 0.25
  EXPECT_EQ(y[16], 0.f);    // 0
  EXPECT_EQ(y[31], 30.f);   // 120 · 0.25
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.25f) << j;
}

TEST(GgufQuant, Q4_0) {
  Block k(18);
  k.h(0, kHalf);
  for (int j = 0; j < 16; ++j) k.b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(GgmlType::Q4_0, k, 32);
  EXPECT_EQ(y[0], -4.f);    // (0 − 8) · 0.5
  EXPECT_EQ(y[15], 3.5f);   // (15 − 8) · 0.5
  EXPECT_EQ(y[16], 3.5f);   // high nibble of byte 0 is 15
  EXPECT_EQ(y[31], -4.f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[16 + j], (15 - j - 8) * 0.5f);
  }
}

TEST(GgufQuant, Q4_1) {
  Block k(20);
  k.h(0, kHalf), k.h(2, kMinusOne);
  for (int j = 0; j < 16; ++j) k.b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(GgmlType::Q4_1, k, 32);
  EXPECT_EQ(y[0], -1.f);    // 0 · 0.5 − 1
  EXPECT_EQ(y[3], 0.5f);    // 3 · 0.5 − 1
  EXPECT_EQ(y[16], 6.5f);   // 15 · 0.5 − 1
  EXPECT_EQ(y[31], -1.f);
}

// qh = 0xAAAAAAAA: the fifth bit is set for every odd element; qs[j] = j in both nibbles.
TEST(GgufQuant, Q5_0) {
  Block k(22);
  k.h(0, kOne);
  for (int i = 0; i < 4; ++i) k.b[2 + i] = 0xAA;
  for (int j = 0; j < 16; ++j) k.b[6 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = decode(GgmlType::Q5_0, k, 32);
  EXPECT_EQ(y[0], -16.f);   // 0 − 16
  EXPECT_EQ(y[1], 1.f);     // (1 | 16) − 16
  EXPECT_EQ(y[16], -16.f);
  EXPECT_EQ(y[17], 1.f);
  EXPECT_EQ(y[30], -2.f);   // 14 − 16
  EXPECT_EQ(y[31], 15.f);   // (15 | 16) − 16
}

TEST(GgufQuant, Q5_1) {
  Block k(24);
  k.h(0, kHalf), k.h(2, kOne);
  for (int i = 0; i < 4; ++i) k.b[4 + i] = 0xAA;
  for (int j = 0; j < 16; ++j) k.b[8 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = decode(GgmlType::Q5_1, k, 32);
  EXPECT_EQ(y[0], 1.f);     // 0 · 0.5 + 1
  EXPECT_EQ(y[1], 9.5f);    // 17 · 0.5 + 1
  EXPECT_EQ(y[30], 8.f);    // 14 · 0.5 + 1
  EXPECT_EQ(y[31], 16.5f);  // 31 · 0.5 + 1
}

// Q2_K: d = 1, dmin = 0.5; scales[g] = (g & 15) | (g % 4) << 4; every qs byte 0xE4 so the
// 2-bit field at bit 2p is p. Element e: group e/16, p = (e % 128) / 32.
TEST(GgufQuant, Q2_K) {
  Block k(84);
  for (int g = 0; g < 16; ++g) k.b[g] = static_cast<uint8_t>((g & 15) | ((g % 4) << 4));
  for (int i = 0; i < 64; ++i) k.b[16 + i] = 0xE4;
  k.h(80, kOne), k.h(82, kHalf);
  const auto y = decode(GgmlType::Q2_K, k, 256);
  EXPECT_EQ(y[0], 0.f);      // 0·0 − 0.5·0
  EXPECT_EQ(y[40], 1.f);     // group 2, p 1: 2·1 − 0.5·2
  EXPECT_EQ(y[130], 0.f);    // group 8, p 0: 8·0 − 0
  EXPECT_EQ(y[200], 24.f);   // group 12, p 2: 12·2 − 0
  EXPECT_EQ(y[255], 43.5f);  // group 15, p 3: 15·3 − 0.5·3
}

// Q3_K: d = 0.5. Scale bytes: b0 = 0x05, b1 = 0x3A, b8 = 0xE6, b9 = 0x02, others 0, giving
// s0 = 5|2<<4 = 37, s1 = 10|2<<4 = 42, s4 = 0|1<<4 = 16, s8 = 0|2<<4 = 32, s9 = 3, s12 = 0|3<<4 = 48,
// all other s = 0; the multiplier is s − 32. qs: first half 0xE4 (field p = p), second half
// 0xFF (3). hmask all set except hmask[0] bit 0 and hmask[5] bit 6 (subtract 4 there).
TEST(GgufQuant, Q3_K) {
  Block k(110);
  for (int i = 0; i < 32; ++i) k.b[i] = 0xFF;
  k.b[0] = 0xFE, k.b[5] = 0xBF;
  for (int i = 0; i < 32; ++i) k.b[32 + i] = 0xE4, k.b[64 + i] = 0xFF;
  k.b[96 + 0] = 0x05, k.b[96 + 1] = 0x3A, k.b[96 + 8] = 0xE6, k.b[96 + 9] = 0x02;
  k.h(108, kHalf);
  const auto y = decode(GgmlType::Q3_K, k, 256);
  EXPECT_EQ(y[0], -10.f);    // 0.5 · 5 · (0 − 4)
  EXPECT_EQ(y[1], 0.f);      // q 0, bit set
  EXPECT_EQ(y[48], -16.f);   // group 3 (s 0 → −32), p 1: 0.5 · −32 · 1
  EXPECT_EQ(y[64], -16.f);   // group 4 (16 − 32), p 2: 0.5 · −16 · 2
  EXPECT_EQ(y[128], 0.f);    // group 8 (32 − 32)
  EXPECT_EQ(y[144], -43.5f); // group 9 (3 − 32), q 3: 0.5 · −29 · 3
  EXPECT_EQ(y[192], 24.f);   // group 12 (48 − 32), q 3: 0.5 · 16 · 3
  EXPECT_EQ(y[197], -8.f);   // group 12, hmask[5] bit 6 clear: 0.5 · 16 · (3 − 4)
}

// Q4_K / Q5_K scale bytes: b0 = 0x41, b1 = 2, b2 = 3, b3 = 4, b4 = 0x81, b8 = 0x53, others 0:
// scales 1, 2, 3, 4, 19 (3 | 1<<4), 0, 0, 0; mins 1, 0, 0, 0, 37 (5 | 2<<4), 0, 0, 0.
// d = 0.5, dmin = 0.25; every qs byte 0x73 (low nibble 3, high nibble 7).
void k4_scales(Block& k) {
  k.h(0, kHalf), k.h(2, kQuarter);
  uint8_t* s = k.b.data() + 4;
  s[0] = 0x41, s[1] = 2, s[2] = 3, s[3] = 4, s[4] = 0x81, s[8] = 0x53;
}

TEST(GgufQuant, Q4_K) {
  Block k(144);
  k4_scales(k);
  for (int i = 0; i < 128; ++i) k.b[16 + i] = 0x73;
  const auto y = decode(GgmlType::Q4_K, k, 256);
  EXPECT_EQ(y[0], 1.25f);    // sub-block 0: 0.5·1·3 − 0.25·1
  EXPECT_EQ(y[32], 7.f);     // sub-block 1: 0.5·2·7
  EXPECT_EQ(y[64], 4.5f);    // sub-block 2: 0.5·3·3
  EXPECT_EQ(y[127], 14.f);   // sub-block 3: 0.5·4·7
  EXPECT_EQ(y[128], 19.25f); // sub-block 4: 0.5·19·3 − 0.25·37
  EXPECT_EQ(y[160], 0.f);    // sub-block 5: scale 0, min 0
}

TEST(GgufQuant, Q5_K) {
  Block k(176);
  k4_scales(k);
  k.b[16 + 0] = 0x01;  // element 0 (sub-block 0) gets +16
  k.b[16 + 1] = 0x10;  // element 129 (sub-block 4, l = 1) gets +16
  for (int i = 0; i < 128; ++i) k.b[48 + i] = 0x73;
  const auto y = decode(GgmlType::Q5_K, k, 256);
  EXPECT_EQ(y[0], 9.25f);     // 0.5·1·(3 + 16) − 0.25
  EXPECT_EQ(y[1], 1.25f);
  EXPECT_EQ(y[128], 19.25f);
  EXPECT_EQ(y[129], 171.25f); // 0.5·19·(3 + 16) − 0.25·37
  EXPECT_EQ(y[32], 7.f);
}

// Q6_K: d = 0.25, scales[i] = i − 8, every ql byte 0x21, every qh byte 0x93 (fields at bits
// 0, 2, 4, 6 = 3, 0, 1, 2). Element e: scale (e/16 − 8); within its half, quarter k = (e % 128)/32.
TEST(GgufQuant, Q6_K) {
  Block k(210);
  for (int i = 0; i < 128; ++i) k.b[i] = 0x21;
  for (int i = 0; i < 64; ++i) k.b[128 + i] = 0x93;
  for (int i = 0; i < 16; ++i) k.b[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 8));
  k.h(208, kQuarter);
  const auto y = decode(GgmlType::Q6_K, k, 256);
  EXPECT_EQ(y[0], -34.f);    // (1 | 3<<4) − 32 = 17; 0.25 · −8 · 17
  EXPECT_EQ(y[40], 46.5f);   // k 1: (1 | 0) − 32 = −31; scale 2 − 8 = −6
  EXPECT_EQ(y[70], 14.f);    // k 2: (2 | 1<<4) − 32 = −14; scale −4
  EXPECT_EQ(y[136], 0.f);    // scale 8 − 8 = 0
  EXPECT_EQ(y[255], 3.5f);   // k 3: (2 | 2<<4) − 32 = 2; scale 7
}

// MXFP4 (OCP Microscaling FP4, as ggml stores it): E8M0 exponent e, then the E2M1 codes, low
// nibbles first. E2M1: sign bit 3, then exponent bits 2-1 and mantissa bit 0: code 1 = 0.5
// (subnormal), 2 = 1, 3 = 1.5, 4 = 2, 5 = 3, 6 = 4, 7 = 6; the block's scale is 2^(e − 127).
TEST(GgufQuant, MXFP4) {
  Block k(17 * 3);
  k.b[0] = 127;                // scale 1
  k.b[1] = 0x71;               // element 0: code 1 (0.5), element 16: code 7 (6)
  k.b[2] = 0xA5;               // element 1: code 5 (3), element 17: code 0xA (−1)
  k.b[16] = 0x8F;              // element 15: code 0xF (−6), element 31: code 8 (−0)
  k.b[17] = 130;               // block 1: scale 8
  k.b[18] = 0x36;              // element 32: code 6 (4 · 8), element 48: code 3 (1.5 · 8)
  k.b[34] = 1;                 // block 2: scale 2^−126 (the smallest normal)
  k.b[35] = 0x01;              // element 64: 0.5 · 2^−126, a subnormal float
  const auto y = decode(GgmlType::MXFP4, k, 96);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[16], 6.f);
  EXPECT_EQ(y[1], 3.f);
  EXPECT_EQ(y[17], -1.f);
  EXPECT_EQ(y[15], -6.f);
  EXPECT_EQ(y[31], 0.f);
  EXPECT_EQ(y[2], 0.f);
  EXPECT_EQ(y[32], 32.f);
  EXPECT_EQ(y[48], 12.f);
  EXPECT_EQ(y[64], std::ldexp(0.5f, -126));
  EXPECT_EQ(y[65], 0.f);
}

// --- Random blocks against a per-element statement of each layout.

float h16(const uint8_t* p) { return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// The value of element e (0..255 or 0..31) of one block, read straight from the layout.
float reference_element(GgmlType t, const uint8_t* b, int e) {
  switch (t) {
    case GgmlType::Q8_0: return static_cast<int8_t>(b[2 + e]) * h16(b);
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: {
      const bool has_min = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
      const bool five = t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
      const uint8_t* qs = b + 2 + (has_min ? 2 : 0) + (five ? 4 : 0);
      int n = (qs[e % 16] >> (e < 16 ? 0 : 4)) & 15;
      if (five) {
        const uint8_t* qh = b + (has_min ? 4 : 2);
        n |= ((qh[e / 8] >> (e % 8)) & 1) << 4;
      }
      if (has_min) return n * h16(b) + h16(b + 2);
      return (n - (five ? 16 : 8)) * h16(b);
    }
    case GgmlType::Q2_K: {
      const uint8_t sc = b[e / 16];
      const int q = (b[16 + 32 * (e / 128) + 16 * ((e / 16) % 2) + e % 16] >> (2 * ((e % 128) / 32))) & 3;
      return h16(b + 80) * (sc & 15) * q - h16(b + 82) * (sc >> 4);
    }
    case GgmlType::Q3_K: {
      const int g = e / 16, kk = 16 * ((e / 16) % 2) + e % 16, p = (e % 128) / 32;
      const uint8_t* sb = b + 96;
      const int low = g < 8 ? (sb[g] & 15) : (sb[g - 8] >> 4);
      const int high = (sb[8 + g % 4] >> (2 * (g / 4))) & 3;
      const int q = (b[32 + 32 * (e / 128) + kk] >> (2 * p)) & 3;
      const int hbit = (b[kk] >> (4 * (e / 128) + p)) & 1;
      return h16(b + 108) * ((low | high << 4) - 32) * (q - (hbit ? 0 : 4));
    }
    case GgmlType::Q4_K: case GgmlType::Q5_K: {
      const int s = e / 32;  // sub-block: scale/min pair s
      const uint8_t* sb = b + 4;
      const int sc = s < 4 ? (sb[s] & 63) : ((sb[s + 4] & 15) | (sb[s - 4] >> 6) << 4);
      const int m = s < 4 ? (sb[s + 4] & 63) : ((sb[s + 4] >> 4) | (sb[s] >> 6) << 4);
      const bool five = t == GgmlType::Q5_K;
      const uint8_t* qs = b + (five ? 48 : 16);
      int n = (qs[32 * (s / 2) + e % 32] >> (4 * (s % 2))) & 15;
      if (five) n += ((b[16 + e % 32] >> s) & 1) * 16;
      return h16(b) * sc * n - h16(b + 2) * m;
    }
    case GgmlType::Q6_K: {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int low = (b[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 15;
      const int high = (b[128 + 32 * h + l] >> (2 * k)) & 3;
      return h16(b + 208) * static_cast<int8_t>(b[192 + e / 16]) * ((low | high << 4) - 32);
    }
    default: return NAN;
  }
}

TEST(GgufQuant, RandomBlocksMatchTheLayout) {
  std::mt19937 rng(7);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                     GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const GgmlTypeInfo& info = ggml_type_info(t);
    const int blocks = 3;
    Block k(blocks * info.block_bytes);
    for (auto& x : k.b) x = rng() & 0xff;
    // fp16 fields with random bytes may be inf/NaN; give every block finite ones.
    for (int i = 0; i < blocks; ++i)
      for (int at : {0, 2, 80, 82, 108, 208})
        if (at + 2 <= info.block_bytes) {
          const bool is_half_field =
              (at == 0 && t != GgmlType::Q2_K && t != GgmlType::Q3_K && t != GgmlType::Q6_K) ||
              (at == 2 && (t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K)) ||
              ((at == 80 || at == 82) && t == GgmlType::Q2_K) || (at == 108 && t == GgmlType::Q3_K) ||
              (at == 208 && t == GgmlType::Q6_K);
          if (is_half_field) k.h(i * info.block_bytes + at, static_cast<uint16_t>(0x2000 + (rng() % 0x1800)));
        }
    const auto y = decode(t, k, blocks * info.block_elems);
    for (int i = 0; i < blocks; ++i)
      for (int e = 0; e < info.block_elems; ++e) {
        const float want = reference_element(t, k.b.data() + i * info.block_bytes, e);
        ASSERT_NEAR(y[i * info.block_elems + e], want, 1e-6f * (1.f + std::abs(want)))
            << info.name << " block " << i << " element " << e;
      }
  }
}

}  // namespace
}  // namespace attnviz
