// The int8 arithmetic's activation quantizer and its portable kernels (plain C++): each
// weight block unpacked into its integers and integer scales, dotted with the activation's
// integers in int32, the float scales applied once per block (int8_kernels.h). The fallback
// on CPUs without AVX2, and the family the others are tested against.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/engine/int8_kernels.h"
#include "core/model/safetensors.h"  // half_to_float

namespace attnviz::int8 {

bool supported(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4: return true;
    default: return false;
  }
}

int act_block(GgmlType type) {
  return type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K ? 256 : 32;
}

void quantize_row(const float* x, int64_t K, int B, int8_t* q, float* d, int32_t* sums, float* dsums, int16_t* sums16) {
  for (int64_t b = 0; b < K / B; ++b) {
    const float* xb = x + b * B;
    int8_t* qb = q + b * B;
    // max |x| as the largest bit pattern with the sign cleared (the same order as the values
    // for non-negative floats; NaN's patterns lie above infinity's): an integer maximum, which
    // vectorises, where a float one keeps its order of NaN tests.
    uint32_t bits = 0;
    for (int j = 0; j < B; ++j) {
      uint32_t u;
      std::memcpy(&u, xb + j, 4);
      bits = std::max(bits, u & 0x7fffffffu);
    }
    float amax;
    std::memcpy(&amax, &bits, 4);
    if (!(amax <= std::numeric_limits<float>::max())) {  // an infinity or NaN in the block:
      d[b] = amax;                                       // d·q is NaN, as the values were not
      std::fill(qb, qb + B, int8_t{0});                  // numbers
      continue;
    }
    const float db = amax / 127.f, id = db > 0.f ? 127.f / amax : 0.f;
    d[b] = db;
    for (int j = 0; j < B; ++j) {
      // round(v), half away from zero, as std::lround gives it, in steps that vectorise: the
      // truncation t, then the exact remainder v − t (|v| ≤ 127 and a bit) moves it by one.
      const float v = xb[j] * id;
      int32_t t = static_cast<int32_t>(v);
      const float f = v - static_cast<float>(t);
      t += static_cast<int32_t>(f >= 0.5f) - static_cast<int32_t>(f <= -0.5f);
      qb[j] = static_cast<int8_t>(std::clamp<int32_t>(t, -127, 127));  // |x·id| ≤ 127 up to rounding
    }
  }
  for (int64_t g = 0; g < K / 32; ++g) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += q[g * 32 + j];
    sums[g] = s;
    if (dsums) dsums[g] = d[g * 32 / B] * static_cast<float>(s);
  }
  if (sums16)
    for (int64_t h = 0; h < K / 16; ++h) {
      int32_t s = 0;
      for (int j = 0; j < 16; ++j) s += q[h * 16 + j];
      sums16[h] = static_cast<int16_t>(s);  // |s| ≤ 16·127
    }
}

namespace {

inline uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline float f16(const uint8_t* p) { return half_to_float(u16(p)); }

// A 32-element block as d·w[j] + m.
struct Block32 {
  int32_t w[32];
  float d, m;
};

void unpack32(GgmlType type, const uint8_t* b, Block32& o) {
  o.m = 0.f;
  if (type == GgmlType::MXFP4) {  // e, qs[16]: the doubled E2M1 values (integers) times 2^(e − 128)
    o.d = mxfp4_half_scale(b[0]);
    for (int j = 0; j < 16; ++j)
      o.w[j] = static_cast<int32_t>(kMxfp4Values[b[1 + j] & 15]),
      o.w[16 + j] = static_cast<int32_t>(kMxfp4Values[b[1 + j] >> 4]);
    return;
  }
  o.d = f16(b);
  switch (type) {
    case GgmlType::Q8_0:
      for (int j = 0; j < 32; ++j) o.w[j] = static_cast<int8_t>(b[2 + j]);
      return;
    case GgmlType::Q4_0:
      for (int j = 0; j < 16; ++j) o.w[j] = (b[2 + j] & 15) - 8, o.w[16 + j] = (b[2 + j] >> 4) - 8;
      return;
    case GgmlType::Q4_1:
      o.m = f16(b + 2);
      for (int j = 0; j < 16; ++j) o.w[j] = b[4 + j] & 15, o.w[16 + j] = b[4 + j] >> 4;
      return;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {
      const bool min = type == GgmlType::Q5_1;
      if (min) o.m = f16(b + 2);
      const uint8_t* qh = b + (min ? 4 : 2);
      const uint32_t h = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (static_cast<uint32_t>(qh[3]) << 24);
      const uint8_t* qs = qh + 4;
      const int off = min ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        o.w[j] = ((qs[j] & 15) | (((h >> j) & 1) << 4)) - off;
        o.w[16 + j] = ((qs[j] >> 4) | (((h >> (16 + j)) & 1) << 4)) - off;
      }
      return;
    }
    default: return;
  }
}

// A 256-element super-block as d·sc[j / 16]·w[j] − dmin·mins[j / 32].
struct Block256 {
  int32_t w[256], sc[16], mins[8];
  float d, dmin;
};

void scale_min(const uint8_t* q, int i, int32_t* sc, int32_t* m) {
  if (i < 4) {
    *sc = q[i] & 63, *m = q[i + 4] & 63;
  } else {
    *sc = (q[i + 4] & 0xF) | ((q[i - 4] >> 6) << 4);
    *m = (q[i + 4] >> 4) | ((q[i] >> 6) << 4);
  }
}

void unpack256(GgmlType type, const uint8_t* b, Block256& o) {
  if (type == GgmlType::Q6_K) {  // ql[128], qh[64], scales[16] int8, d
    o.d = f16(b + 208), o.dmin = 0.f;
    for (int i = 0; i < 8; ++i) o.mins[i] = 0;
    for (int i = 0; i < 16; ++i) o.sc[i] = static_cast<int8_t>(b[192 + i]);
    for (int h = 0; h < 2; ++h) {
      const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
      for (int l = 0; l < 32; ++l) {
        int32_t* w = o.w + 128 * h + l;
        w[0] = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
        w[32] = ((ql[32 + l] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        w[64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        w[96] = ((ql[32 + l] >> 4) | ((qh[l] >> 6) << 4)) - 32;
      }
    }
    return;
  }
  // Q4_K: d, dmin, scales[12], qs[128]; Q5_K: the same, then qh[32] before qs.
  o.d = f16(b), o.dmin = f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int32_t sc = 0, m = 0;
    scale_min(b + 4, j, &sc, &m);
    o.sc[2 * j] = o.sc[2 * j + 1] = sc;
    o.mins[j] = m;
  }
  const bool five = type == GgmlType::Q5_K;
  const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const uint8_t v = qs[32 * c + l];
      o.w[64 * c + l] = (v & 15) | (five ? ((qh[l] >> (2 * c)) & 1) << 4 : 0);
      o.w[64 * c + 32 + l] = (v >> 4) | (five ? ((qh[l] >> (2 * c + 1)) & 1) << 4 : 0);
    }
}

// The loop both block sizes share: each weight row's blocks unpacked once (unpack(bytes,
// blk)) and dotted with the M activation rows (dot(blk, i, b): block b's term for row i).
template <class Block, class Unpack, class Dot>
void each_row(const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t blocks, int block_bytes, int M, float* y,
              int64_t ldy, Unpack&& unpack, Dot&& dot) {
  Block blk;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    float acc[kRows] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      unpack(row + b * block_bytes, blk);
      for (int i = 0; i < M; ++i) acc[i] += dot(blk, i, b);
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = acc[i];
  }
}

void matvec_portable(GgmlType type, const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, int M,
                     float* y, int64_t ldy) {
  const int64_t K = x.K;
  const GgmlTypeInfo& info = ggml_type_info(type);
  const int64_t blocks = K / info.block_elems;
  if (act_block(type) == 32)
    return each_row<Block32>(
        rows, row_bytes, n, blocks, info.block_bytes, M, y, ldy,
        [type](const uint8_t* b, Block32& blk) { unpack32(type, b, blk); },
        [&x, K](const Block32& blk, int i, int64_t b) {
          const int8_t* q = x.q + i * K + b * 32;
          int32_t s = 0;
          for (int j = 0; j < 32; ++j) s += blk.w[j] * q[j];
          const float dx = x.d[i * (K / 32) + b];
          return blk.d * dx * static_cast<float>(s) + blk.m * dx * static_cast<float>(x.sums[i * (K / 32) + b]);
        });
  each_row<Block256>(
      rows, row_bytes, n, blocks, info.block_bytes, M, y, ldy,
      [type](const uint8_t* b, Block256& blk) { unpack256(type, b, blk); },
      [&x, K](const Block256& blk, int i, int64_t b) {
        const int8_t* q = x.q + i * K + b * 256;
        const int32_t* sums = x.sums + i * (K / 32) + b * 8;
        int32_t s = 0, ms = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t t = 0;
          for (int j = 0; j < 16; ++j) t += blk.w[16 * g + j] * q[16 * g + j];
          s += blk.sc[g] * t;
        }
        for (int j = 0; j < 8; ++j) ms += blk.mins[j] * sums[j];
        const float dx = x.d[i * (K / 256) + b];
        return blk.d * dx * static_cast<float>(s) - blk.dmin * dx * static_cast<float>(ms);
      });
}

const Kernels kPortable = {"portable", matvec_portable};

}  // namespace

const Kernels& portable_kernels() { return kPortable; }

}  // namespace attnviz::int8
