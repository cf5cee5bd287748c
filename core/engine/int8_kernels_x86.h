// The int8 arithmetic's x86 kernels (int8_kernels.h) written once over the instructions that
// multiply bytes, `O`, and included by each x86 family's file (int8_kernels_{avx2,avxvnni,
// avx512vnni}.cpp), which defines O and is compiled with its own instruction-set flags.
// Everything here sits in an anonymous namespace, so each family's copy stays in its own
// object file (no function compiled for AVX-VNNI can be picked by the linker for an AVX2 CPU).
//
// 32 weights at a time are unpacked into bytes (256-bit vectors) and multiplied by the
// activation's bytes. O provides, for u unsigned bytes and s signed bytes:
//   dot(u, s): int32 lane k = Σ u·s over bytes 4k … 4k + 3;
//   dot_scaled_acc(acc, u, s, scale): acc + the int16 pair sums of u·s (lanes 0…7: bytes
//     0…15, lanes 8…15: bytes 16…31) times scale's int16 lanes, summed in pairs into int32.
// AVX2 does both with maddubs (unsigned × signed byte pairs summed into int16) and madd; the
// VNNI families with one dpbusd (bytes straight into int32) and maddubs + dpwssd.
//
// maddubs saturates at ±32767: each pair here stays below it. The weight byte is unsigned
// (the 4-, 5- and 6-bit types: n ≤ 63, Q4_0's, Q5_0's and Q6_K's offsets kept apart) or, for
// Q8_0 and MXFP4, made so by moving its sign onto the activation (|w| ≤ 128), and |q| ≤ 127: at most
// 2·128·127 = 32512. dpbusd does not saturate. The int32 sums of a 256-element super-block
// stay below 2^25. So every family computes the same integers.
#pragma once
#if !defined(__x86_64__) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "int8_kernels_x86.h is included by the x86 families' files, compiled with -mavx2 -mfma -mf16c at least"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/engine/int8_kernels.h"
#include "core/engine/prefetch_ahead.h"

namespace attnviz::int8 {
namespace {

inline uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline float h2f(const uint8_t* p) { return _cvtsh_ss(u16(p)); }
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bytes(int8_t v) { return _mm256_set1_epi8(v); }

// 16 bytes of nibbles as 32 bytes: the low nibbles (elements 0…15) in the low half, the high
// ones (elements 16…31) in the high half.
inline __m256i nibbles(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), bytes(15));
}

// Bit j of h as byte j: 0xFF where set, 0 where clear.
inline __m256i bit_bytes(uint32_t h) {
  const __m256i spread = _mm256_shuffle_epi8(  // byte j ← byte j / 8 of h
      _mm256_set1_epi32(static_cast<int32_t>(h)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));  // bit j mod 8
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

inline float hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// --- the 32-element types: one block is d·w + m for 32 bytes w.

struct Unpacked32 {
  __m256i w;     // unsigned bytes, or |w| for Q8_0
  __m256i sign;  // Q8_0: w itself (its sign goes onto the activation)
  float d, m;
};

// Q4_0 and Q5_0 are taken unsigned, with their offset (8 or 16) as a min of −8·d or −16·d:
// no sign to move, the same arithmetic as Q4_1 and Q5_1. Q8_0 and MXFP4 (whose codes become
// the signed integers ±{0, 1, 2, 3, 4, 6, 8, 12} through a byte shuffle) move their sign.
template <GgmlType T>
inline Unpacked32 unpack32(const uint8_t* b) {
  Unpacked32 u;
  u.d = h2f(b);
  u.m = 0.f;
  if constexpr (T == GgmlType::Q8_0) {
    u.sign = load32(b + 2);
    u.w = _mm256_sign_epi8(u.sign, u.sign);
  } else if constexpr (T == GgmlType::Q4_0) {
    u.m = -8.f * u.d;
    u.w = nibbles(b + 2);
  } else if constexpr (T == GgmlType::Q4_1) {
    u.m = h2f(b + 2);
    u.w = nibbles(b + 4);
  } else if constexpr (T == GgmlType::Q5_0) {
    u.m = -16.f * u.d;
    const uint32_t qh = static_cast<uint32_t>(u16(b + 2)) | (static_cast<uint32_t>(u16(b + 4)) << 16);
    u.w = _mm256_or_si256(nibbles(b + 6), _mm256_and_si256(bit_bytes(qh), bytes(16)));
  } else if constexpr (T == GgmlType::MXFP4) {  // codes looked up as the doubled E2M1 values, signed
    u.d = mxfp4_half_scale(b[0]);
    const __m256i table = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,  //
                                           0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    u.sign = _mm256_shuffle_epi8(table, nibbles(b + 1));
    u.w = _mm256_sign_epi8(u.sign, u.sign);
  } else {  // Q5_1
    u.m = h2f(b + 2);
    const uint32_t qh = static_cast<uint32_t>(u16(b + 4)) | (static_cast<uint32_t>(u16(b + 6)) << 16);
    u.w = _mm256_or_si256(nibbles(b + 8), _mm256_and_si256(bit_bytes(qh), bytes(16)));
  }
  return u;
}

template <GgmlType T>
constexpr bool kSigned32 = T == GgmlType::Q8_0 || T == GgmlType::MXFP4;

template <class O, GgmlType T, int BB, int M>
void matvec32(const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  const int64_t K = x.K, nb = K / 32;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    __m256 acc[M][2];  // even and odd blocks: two chains of multiply-adds per row
    float macc[M];
    for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps(), macc[i] = 0.f;
#pragma GCC unroll 2
    for (int64_t b = 0; b < nb; ++b) {
      if (b % 2 == 0) prefetch_ahead<2 * BB>(row + b * BB, row_bytes);
      const Unpacked32 u = unpack32<T>(row + b * BB);
      for (int i = 0; i < M; ++i) {
        __m256i q = load32(x.q + i * K + b * 32);
        if constexpr (kSigned32<T>) q = _mm256_sign_epi8(q, u.sign);
        const float dx = x.d[i * nb + b];
        __m256& a = acc[i][b & 1];
        a = _mm256_fmadd_ps(_mm256_set1_ps(u.d * dx), _mm256_cvtepi32_ps(O::dot(u.w, q)), a);
        if constexpr (!kSigned32<T>) macc[i] += u.m * x.dsums[i * nb + b];
      }
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = hsum(_mm256_add_ps(acc[i][0], acc[i][1])) + macc[i];
  }
}

// --- the super-block types.

// The eight six-bit scales and mins of a Q4_K / Q5_K super-block (12 bytes at q), as eight
// bytes each: scales j < 4 are the low six bits of q[j], mins those of q[4 + j]; scales
// j ≥ 4 take their low four bits from q[4 + j] and their top two from q[j − 4]'s top two,
// mins the high four of q[4 + j] and the top two of q[j]. Done on 32-bit words, four at once.
inline void scales_mins_k4(const uint8_t* q, uint64_t* sc, uint64_t* mn) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, q, 4);
  std::memcpy(&w1, q + 4, 4);
  std::memcpy(&w2, q + 8, 4);
  const uint32_t lo6 = 0x3f3f3f3f, lo4 = 0x0f0f0f0f, lo2 = 0x03030303;
  const uint32_t s_lo = w0 & lo6, m_lo = w1 & lo6;
  const uint32_t s_hi = (w2 & lo4) | (((w0 >> 6) & lo2) << 4);
  const uint32_t m_hi = ((w2 >> 4) & lo4) | (((w1 >> 6) & lo2) << 4);
  *sc = s_lo | (static_cast<uint64_t>(s_hi) << 32);
  *mn = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// Lane pattern for _mm256_shuffle_epi8 that repeats int16 lane j of each 128-bit half.
inline __m256i pick16(int j) { return _mm256_set1_epi16(static_cast<int16_t>(((2 * j + 1) << 8) | (2 * j))); }

// Q4_K (144 bytes) and Q5_K (176): (d·sc_j)·n − dmin·m_j over sub-block j of 32.
template <class O, bool kFive, int M>
void matvec_q45k(const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  constexpr int BB = kFive ? 176 : 144, QS = kFive ? 48 : 16;
  const int64_t K = x.K, nb = K / 256, ng = K / 32;
  const __m256i pick[8] = {pick16(0), pick16(1), pick16(2), pick16(3), pick16(4), pick16(5), pick16(6), pick16(7)};
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    __m256 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * BB;
      prefetch_ahead<BB>(blk, row_bytes);
      const float d = h2f(blk), dmin = h2f(blk + 2);
      uint64_t sc8, mn8;
      scales_mins_k4(blk + 4, &sc8, &mn8);
      // The eight scales as int16 in both halves; the eight mins as int32.
      const __m256i sc16 =
          _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8))));
      const __m256i mn32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(mn8)));
      __m256i isum[M];
      for (int i = 0; i < M; ++i) isum[i] = _mm256_setzero_si256();
      __m256i hv = _mm256_setzero_si256();
      if constexpr (kFive) hv = load32(blk + 16);
      for (int c = 0; c < 4; ++c) {
        const __m256i v = load32(blk + QS + 32 * c);
        __m256i lo = _mm256_and_si256(v, bytes(15));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(15));
        if constexpr (kFive) {
          const __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hv, s0), bytes(1)), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hv, s1), bytes(1)), 4));
        }
        const __m256i s_lo = _mm256_shuffle_epi8(sc16, pick[2 * c]);
        const __m256i s_hi = _mm256_shuffle_epi8(sc16, pick[2 * c + 1]);
        for (int i = 0; i < M; ++i) {
          const int8_t* q = x.q + i * K + b * 256 + 64 * c;
          isum[i] = O::dot_scaled_acc(O::dot_scaled_acc(isum[i], lo, load32(q), s_lo), hi, load32(q + 32), s_hi);
        }
      }
      for (int i = 0; i < M; ++i) {
        const float dx = x.d[i * nb + b];
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(isum[i]), acc[i]);
        // − dmin·m_j·Σq_j, lane j: added to the same lanes (only their total matters).
        const __m256i ms = _mm256_mullo_epi32(mn32, load32(x.sums + i * ng + 8 * b));
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * dx), _mm256_cvtepi32_ps(ms), acc[i]);
      }
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = hsum(acc[i]);
  }
}

// Q6_K (210 bytes): d·sc_g·(n6 − 32) over groups g of 16. n6 (0…63) is taken unsigned; the
// offset is −32·Σ_g sc_g·(Σq over group g), from the activation's sums16, once per super-block.
template <class O, int M>
void matvec_q6k(const uint8_t* rows, int64_t row_bytes, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  const int64_t K = x.K, nb = K / 256;
  // Within a half's eight scales (int16, in both 128-bit halves): chunk k's pattern repeats
  // scale 2k in the low half (its first 16 values) and 2k + 1 in the high half.
  __m256i pick[4];
  for (int k = 0; k < 4; ++k) {
    const int16_t lo = static_cast<int16_t>(((4 * k + 1) << 8) | (4 * k)),
                  hi = static_cast<int16_t>(((4 * k + 3) << 8) | (4 * k + 2));
    pick[k] = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
  }
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    __m256 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * 210;
      prefetch_ahead<210>(blk, row_bytes);
      const float d = h2f(blk + 208);
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
      __m256i isum[M];
      for (int i = 0; i < M; ++i)  // the offset: −32·Σ_g sc_g·sums16_g
        isum[i] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load32(x.sums16 + i * (K / 16) + 16 * b)), 5),
        isum[i] = _mm256_sub_epi32(_mm256_setzero_si256(), isum[i]);
      for (int h = 0; h < 2; ++h) {
        const __m256i a = load32(blk + 64 * h), c = load32(blk + 64 * h + 32), hh = load32(blk + 128 + 32 * h);
        const __m256i half = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)  // scales 8h … 8h + 7
                                    : _mm256_permute2x128_si256(sc16, sc16, 0x11);
        __m256i w[4];  // elements 128h + 32k + l, l < 32, as n6
        w[0] = _mm256_or_si256(_mm256_and_si256(a, bytes(15)), _mm256_slli_epi16(_mm256_and_si256(hh, bytes(3)), 4));
        w[1] = _mm256_or_si256(_mm256_and_si256(c, bytes(15)), _mm256_slli_epi16(_mm256_and_si256(hh, bytes(12)), 2));
        w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), bytes(15)), _mm256_and_si256(hh, bytes(48)));
        w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), bytes(15)),
                               _mm256_and_si256(_mm256_srli_epi16(hh, 2), bytes(48)));
        for (int k = 0; k < 4; ++k) {
          const __m256i scale = _mm256_shuffle_epi8(half, pick[k]);
          for (int i = 0; i < M; ++i)
            isum[i] = O::dot_scaled_acc(isum[i], w[k], load32(x.q + i * K + b * 256 + 128 * h + 32 * k), scale);
        }
      }
      for (int i = 0; i < M; ++i)
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * x.d[i * nb + b]), _mm256_cvtepi32_ps(isum[i]), acc[i]);
    }
    for (int i = 0; i < M; ++i) y[i * ldy + r] = hsum(acc[i]);
  }
}

template <class O, int M>
void matvec_m(GgmlType type, const uint8_t* rows, int64_t rb, int64_t n, const ActRows& x, float* y, int64_t ldy) {
  switch (type) {
    case GgmlType::Q8_0: return matvec32<O, GgmlType::Q8_0, 34, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q4_0: return matvec32<O, GgmlType::Q4_0, 18, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q4_1: return matvec32<O, GgmlType::Q4_1, 20, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q5_0: return matvec32<O, GgmlType::Q5_0, 22, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q5_1: return matvec32<O, GgmlType::Q5_1, 24, M>(rows, rb, n, x, y, ldy);
    case GgmlType::MXFP4: return matvec32<O, GgmlType::MXFP4, 17, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q4_K: return matvec_q45k<O, false, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q5_K: return matvec_q45k<O, true, M>(rows, rb, n, x, y, ldy);
    case GgmlType::Q6_K: return matvec_q6k<O, M>(rows, rb, n, x, y, ldy);
    default: return;
  }
}

template <class O>
void matvec(GgmlType type, const uint8_t* rows, int64_t rb, int64_t n, const ActRows& x, int M, float* y, int64_t ldy) {
  switch (M) {
    case 1: return matvec_m<O, 1>(type, rows, rb, n, x, y, ldy);
    case 2: return matvec_m<O, 2>(type, rows, rb, n, x, y, ldy);
    case 3: return matvec_m<O, 3>(type, rows, rb, n, x, y, ldy);
    default: return matvec_m<O, 4>(type, rows, rb, n, x, y, ldy);
  }
}

}  // namespace
}  // namespace attnviz::int8
