#include "core/model/gguf_quant.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/model/safetensors.h"  // half_to_float, bf16_to_float

namespace attnviz {

namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {0, "F32", 1, 4},     {1, "F16", 1, 2},      {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},  {7, "Q5_1", 32, 24},   {8, "Q8_0", 32, 34},   {9, "Q8_1", 0, 0},
    {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 0, 0},   {16, "IQ2_XXS", 0, 0}, {17, "IQ2_XS", 0, 0},
    {18, "IQ3_XXS", 0, 0}, {19, "IQ1_S", 0, 0},   {20, "IQ4_NL", 0, 0},  {21, "IQ3_S", 0, 0},
    {22, "IQ2_S", 0, 0},  {23, "IQ4_XS", 0, 0},   {24, "I8", 0, 0},      {25, "I16", 0, 0},
    {26, "I32", 0, 0},    {27, "I64", 0, 0},      {28, "F64", 0, 0},     {29, "IQ1_M", 0, 0},
    {30, "BF16", 1, 2},   {34, "TQ1_0", 0, 0},    {35, "TQ2_0", 0, 0},   {39, "MXFP4", 32, 17},
};

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
float f16(const uint8_t* p) { return half_to_float(u16(p)); }

// Every fp16 bit pattern's value (256 KiB), built once: F16 tensors are converted by lookup.
const float* half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = half_to_float(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

// --- 32-element blocks. Element j < 16 takes the low nibble of qs[j], j ≥ 16 the high
// nibble of qs[j − 16].
int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4); }

// e, qs[16]: kMxfp4Values[code]·2^(e − 128).
void block_mxfp4(const uint8_t* b, float* y) {
  const float d = mxfp4_half_scale(b[0]);
  for (int j = 0; j < 32; ++j) y[j] = kMxfp4Values[nibble(b + 1, j)] * d;
}

void block_q8_0(const uint8_t* b, float* y) {  // d, q[32]
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(b[2 + j]) * d;
}
void block_q4_0(const uint8_t* b, float* y) {  // d, qs[16]
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = (nibble(b + 2, j) - 8) * d;
}
void block_q4_1(const uint8_t* b, float* y) {  // d, m, qs[16]
  const float d = f16(b), m = f16(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = nibble(b + 4, j) * d + m;
}
// The fifth bit of element j is bit j of qh.
int five_bits(const uint8_t* qh, const uint8_t* qs, int j) { return nibble(qs, j) | (((u32(qh) >> j) & 1) << 4); }
void block_q5_0(const uint8_t* b, float* y) {  // d, qh[4], qs[16]
  const float d = f16(b);
  for (int j = 0; j < 32; ++j) y[j] = (five_bits(b + 2, b + 6, j) - 16) * d;
}
void block_q5_1(const uint8_t* b, float* y) {  // d, m, qh[4], qs[16]
  const float d = f16(b), m = f16(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = five_bits(b + 4, b + 8, j) * d + m;
}

// --- 256-element super-blocks.

// Q2_K: scales[16] @0, qs[64] @16, d @80, dmin @82. Sixteen groups of 16 elements; group g
// has scale d·(scales[g] & 15) and min dmin·(scales[g] >> 4). The two halves of 128
// elements each use 32 bytes of qs; within a half, group pair p (0..3) reads the 2-bit
// field at bit 2p of qs[l] (first group) and qs[16 + l] (second group), l = 0..15.
// value = scale·q − min.
void block_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const float d = f16(b + 80), dmin = f16(b + 82);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 16 + 32 * half;
    for (int pair = 0; pair < 4; ++pair)
      for (int second = 0; second < 2; ++second) {
        const uint8_t sc = scales[8 * half + 2 * pair + second];
        const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[16 * second + l] >> (2 * pair)) & 3) - ml;
      }
  }
}

// Q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108. Sixteen six-bit scales s_i:
// low 4 bits from byte i (i < 8, low nibble) or byte i − 8 (i ≥ 8, high nibble), high
// 2 bits from byte 8 + i % 4 at bit 2·(i / 4); the group's scale is d·(s_i − 32). The 2-bit
// quants are laid out as in Q2_K; the third bit of element (half h, pair p, index k =
// 16·second + l) is bit (4h + p) of hmask[k], and a clear bit subtracts 4.
void block_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* sb = b + 96;
  const float d = f16(b + 108);
  int s[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (sb[i] & 0xF) : (sb[i - 8] >> 4);
    const int high = (sb[8 + i % 4] >> (2 * (i / 4))) & 3;
    s[i] = (low | (high << 4)) - 32;
  }
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 32 + 32 * half;
    for (int pair = 0; pair < 4; ++pair)
      for (int second = 0; second < 2; ++second) {
        const float dl = d * s[8 * half + 2 * pair + second];
        const int bit = 4 * half + pair;
        for (int l = 0; l < 16; ++l) {
          const int k = 16 * second + l;
          *y++ = dl * (((q[k] >> (2 * pair)) & 3) - (((hmask[k] >> bit) & 1) ? 0 : 4));
        }
      }
  }
}

// The eight six-bit (scale, min) pairs of Q4_K / Q5_K packed in 12 bytes: for i < 4,
// scale = b[i] & 63 and min = b[i + 4] & 63; for i ≥ 4, scale = (b[i + 4] & 15) | (b[i − 4] >> 6) << 4
// and min = (b[i + 4] >> 4) | (b[i] >> 6) << 4.
void scale_min_k4(const uint8_t* q, int i, int* sc, int* m) {
  if (i < 4) {
    *sc = q[i] & 63;
    *m = q[i + 4] & 63;
  } else {
    *sc = (q[i + 4] & 0xF) | ((q[i - 4] >> 6) << 4);
    *m = (q[i + 4] >> 4) | ((q[i] >> 6) << 4);
  }
}

// Q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16. Four chunks of 64 elements; chunk c uses
// qs[32c .. 32c+32): its first 32 elements the low nibbles (pair 2c), the next 32 the high
// nibbles (pair 2c + 1). value = d·scale·n − dmin·min.
// Q5_K: d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48. As Q4_K, plus a fifth bit:
// element l of sub-block s (s = 0..7, 32 elements each) adds 16 when bit s of qh[l] is set.
template <bool kFifthBit>
void block_k4_or_k5(const uint8_t* b, float* y) {
  const float d = f16(b), dmin = f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = kFifthBit ? b + 48 : b + 16;
  // the fifth bit of element l of sub-block s: 16 or 0
  auto high = [qh](int l, int s) { return kFifthBit && ((qh[l] >> s) & 1) ? 16 : 0; };
  for (int c = 0; c < 4; ++c) {
    const uint8_t* q = qs + 32 * c;
    int sc, m;
    scale_min_k4(scales, 2 * c, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(scales, 2 * c + 1, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + high(l, 2 * c)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + high(l, 2 * c + 1)) - m2;
  }
}

// Q6_K: ql[128] @0, qh[64] @128, scales[16] int8 @192, d @208. Two halves of 128 elements;
// half h uses ql[64h ..], qh[32h ..], scales[8h ..]. For l = 0..31 it builds four 6-bit
// values (4 low bits from ql, 2 high bits from qh[l] at bits 0, 2, 4, 6):
//   y[l]      = ql[l] & 15      | bits 0-1 ;  y[l + 32] = ql[l + 32] & 15 | bits 2-3
//   y[l + 64] = ql[l] >> 4      | bits 4-5 ;  y[l + 96] = ql[l + 32] >> 4 | bits 6-7
// each minus 32, times d·scales[l / 16 + 2k] for y[l + 32k].
void block_q6_k(const uint8_t* b, float* y) {
  const float d = f16(b + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h);
    float* out = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * sc[is] * q1;
      out[l + 32] = d * sc[is + 2] * q2;
      out[l + 64] = d * sc[is + 4] * q3;
      out[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

std::vector<int> ggml_scale_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q5_0: return {0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {};
  }
}

const GgmlTypeInfo& ggml_type_info(GgmlType t) { return *ggml_type_info(static_cast<uint32_t>(t)); }

std::string supported_ggml_types() {
  std::string s;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::MXFP4})
    s += (s.empty() ? "" : ", ") + std::string(ggml_type_info(t).name);
  return s;
}

void dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst) {
  const GgmlTypeInfo* known = ggml_type_info(static_cast<uint32_t>(type));
  if (!known || !known->supported())
    throw std::logic_error("dequantize: type " + std::to_string(static_cast<uint32_t>(type)) + " is not supported");
  const GgmlTypeInfo& info = *known;
  const int64_t blocks = n / info.block_elems;
  void (*block)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);  // GGUF data is little-endian, as is every host we build for
      return;
    case GgmlType::F16: {
      const float* table = half_table();
      for (int64_t i = 0; i < n; ++i) dst[i] = table[u16(src + 2 * i)];
      return;
    }
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(u16(src + 2 * i));
      return;
    case GgmlType::Q8_0: block = block_q8_0; break;
    case GgmlType::Q4_0: block = block_q4_0; break;
    case GgmlType::Q4_1: block = block_q4_1; break;
    case GgmlType::Q5_0: block = block_q5_0; break;
    case GgmlType::Q5_1: block = block_q5_1; break;
    case GgmlType::Q2_K: block = block_q2_k; break;
    case GgmlType::Q3_K: block = block_q3_k; break;
    case GgmlType::Q4_K: block = block_k4_or_k5<false>; break;
    case GgmlType::Q5_K: block = block_k4_or_k5<true>; break;
    case GgmlType::Q6_K: block = block_q6_k; break;
    case GgmlType::MXFP4: block = block_mxfp4; break;
  }
  for (int64_t i = 0; i < blocks; ++i) block(src + i * info.block_bytes, dst + i * info.block_elems);
}

}  // namespace attnviz
