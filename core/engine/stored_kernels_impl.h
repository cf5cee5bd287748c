// The stored-weight kernels written once over a small vector interface `S`, included by each
// kernel family's file (stored_kernels_{portable,avx2,avx512}.cpp), which defines S and is
// compiled with its own instruction-set flags. Everything here sits in an anonymous
// namespace, so each family's copy stays inside its own object file (no inline function
// compiled for AVX-512 can be picked by the linker for a caller on an older CPU).
//
// S provides, for vectors of S::W lanes (F: float32, I: int32):
//   zero, set1, loadu, storeu, add, mul, fma (a·b + c), mul_add / mul_sub (a·b ± c, for a decoded
//   weight whose product a·b is exact), hsum (sum of the lanes),
//   u8 / i8 (W bytes zero- / sign-extended to I), set1i, and_ (with k), or_, add_i / sub_i
//   (I ± k), srl / sll (by a count), srlv (lane by lane), iota (0, 1, … W−1), cvt (I → F),
//   f16 / bf16 / f32 (W values of that type from bytes), h2f (one fp16 → float); kInRegisters
//   (the matrix–vector kernel multiplies each decoded vector by x at once; else through a
//   block buffer) and kChains (independent sums it keeps per row of y).
// Where S::kLut (AVX-512: 16 lanes, one-instruction permutes), also iota_f (0.f … 15.f),
// lut16 (lane j ← table[idx_j mod 16]) and lut32 (lane j ← (lo | hi)[idx_j mod 32]): the
// 4- and 5-bit types then compute the 16 or 32 values a (sub-)block can take, with the very
// formula of dequantize, once, and look each weight up instead of converting it.
//
// Exactness: each weight comes out exactly as `dequantize` (core/model/gguf_quant.cpp) gives
// it. Every product in those formulas is exact in float32: an fp16 scale has at most 11
// significant bits, each integer factor (sub-block scale, min or quant) at most 7, and no
// product needs more than 24 bits (the most: Q6_K's d·sc·q, 11 + 7 + 6). So the only
// rounding is the final sum or difference of Q4_1, Q5_1, Q2_K, Q4_K, Q5_K (e.g. Q4_K's
// (d·sc)·n − dmin·m), and that rounds the same whether the exact product feeds it fused
// (mul_add / mul_sub on FMA hardware) or not. The portable family computes it unfused:
// its file is compiled with -ffp-contract=off, so what it means is what it does.
// Only the accumulation of x·w differs from a float32 loop (lanes, fused multiply-adds).
//
// A decoder D of a type says E (elements per call) and B (bytes per call) and, in run(b, f),
// calls f(off, w) for each vector w of W weights at element offsets [off, off + W) of its
// E elements. The float types (F32, F16, BF16) decode W elements per call and their rows
// may end in a partial vector, which one(row, k) decodes element by element.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/engine/prefetch_ahead.h"
#include "core/model/gguf_quant.h"

namespace attnviz::stored {
namespace {

// A family's constants (see above): S derives from Traits<W, kInRegisters, kChains, kLut>.
template <int kW, bool kReg, int kCh, bool kL>
struct Traits {
  static constexpr int W = kW;
  static constexpr bool kInRegisters = kReg;
  static constexpr int kChains = kCh;
  static constexpr bool kLut = kL;
};

// Whether S has e2m1(codes): each lane's 4-bit E2M1 code (its low 4 bits) as the doubled
// value kMxfp4Values[code], in registers (AVX2: two 8-entry permutes and a blend).
template <class S, class = void>
struct HasE2m1 : std::false_type {};
template <class S>
struct HasE2m1<S, std::void_t<decltype(S::e2m1(std::declval<typename S::I>()))>> : std::true_type {};

inline uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// --- float types: W elements per call.

template <class S>
struct DecF32 {
  static constexpr int E = S::W, B = 4 * S::W;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    f(0, S::f32(b));
  }
  static float one(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};

template <class S>
struct DecF16 {
  static constexpr int E = S::W, B = 2 * S::W;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    f(0, S::f16(b));
  }
  static float one(const uint8_t* row, int64_t k) { return S::h2f(load_u16(row + 2 * k)); }
};

template <class S>
struct DecBF16 {
  static constexpr int E = S::W, B = 2 * S::W;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    f(0, S::bf16(b));
  }
  static float one(const uint8_t* row, int64_t k) {
    const uint32_t bits = static_cast<uint32_t>(load_u16(row + 2 * k)) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

// --- 32-element blocks: element j < 16 is the low nibble of qs[j], j ≥ 16 the high nibble
// of qs[j − 16]; the fifth bit of element j (Q5_0, Q5_1) is bit j of qh.

template <class S>
struct DecQ8_0 {  // d, q[32]: d·q
  static constexpr int E = 32, B = 34;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const typename S::F d = S::set1(S::h2f(load_u16(b)));
#pragma GCC unroll 4
    for (int j = 0; j < 32; j += S::W) f(j, S::mul(S::cvt(S::i8(b + 2 + j)), d));
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

template <class S>
struct DecQ4_0 {  // d, qs[16]: (n − 8)·d
  static constexpr int E = 32, B = 18;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const typename S::F d = S::set1(S::h2f(load_u16(b)));
    if constexpr (S::kLut) {
      const typename S::F tab = S::mul(S::cvt(S::sub_i(S::iota(), 8)), d);  // (n − 8)·d for n < 16
      const typename S::I v = S::u8(b + 2);
      f(0, S::lut16(tab, v));  // the index's low 4 bits: the low nibble
      f(16, S::lut16(tab, S::srl(v, 4)));
      return;
    }
#pragma GCC unroll 2
    for (int j = 0; j < 16; j += S::W) {
      const typename S::I v = S::u8(b + 2 + j);
      f(j, S::mul(S::cvt(S::sub_i(S::and_(v, 15), 8)), d));
      f(16 + j, S::mul(S::cvt(S::sub_i(S::srl(v, 4), 8)), d));
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

template <class S>
struct DecMXFP4 {  // e, qs[16]: kMxfp4Values[n]·2^(e − 128) (gguf_quant.h)
  static constexpr int E = 32, B = 17;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const float d = mxfp4_half_scale(b[0]);
    if constexpr (S::kLut) {
      const typename S::F tab = S::mul(S::loadu(kMxfp4Values), S::set1(d));  // the 16 values a code can take
      const typename S::I v = S::u8(b + 1);
      f(0, S::lut16(tab, v));
      f(16, S::lut16(tab, S::srl(v, 4)));
      return;
    }
    if constexpr (HasE2m1<S>::value) {
      const typename S::F dv = S::set1(d);
#pragma GCC unroll 2
      for (int j = 0; j < 16; j += S::W) {
        const typename S::I v = S::u8(b + 1 + j);
        f(j, S::mul(S::e2m1(S::and_(v, 15)), dv));
        f(16 + j, S::mul(S::e2m1(S::srl(v, 4)), dv));
      }
      return;
    }
    float w[32];  // no integer formula for E2M1: each code through the table
    for (int j = 0; j < 16; ++j) w[j] = kMxfp4Values[b[1 + j] & 15] * d, w[16 + j] = kMxfp4Values[b[1 + j] >> 4] * d;
#pragma GCC unroll 4
    for (int j = 0; j < 32; j += S::W) f(j, S::loadu(w + j));
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

template <class S>
struct DecQ4_1 {  // d, m, qs[16]: n·d + m
  static constexpr int E = 32, B = 20;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const typename S::F d = S::set1(S::h2f(load_u16(b))), m = S::set1(S::h2f(load_u16(b + 2)));
    if constexpr (S::kLut) {
      const typename S::F tab = S::mul_add(S::iota_f(), d, m);  // n·d + m for n < 16
      const typename S::I v = S::u8(b + 4);
      f(0, S::lut16(tab, v));
      f(16, S::lut16(tab, S::srl(v, 4)));
      return;
    }
#pragma GCC unroll 2
    for (int j = 0; j < 16; j += S::W) {
      const typename S::I v = S::u8(b + 4 + j);
      f(j, S::mul_add(S::cvt(S::and_(v, 15)), d, m));
      f(16 + j, S::mul_add(S::cvt(S::srl(v, 4)), d, m));
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// The five-bit values of elements [j, j + W) and [16 + j, 16 + j + W) of a Q5 block.
template <class S>
inline void five_bits(uint32_t qh, const uint8_t* qs, int j, typename S::I* lo, typename S::I* hi) {
  const typename S::I h = S::set1i(static_cast<int32_t>(qh));
  const typename S::I lanes = S::iota();
  const typename S::I v = S::u8(qs + j);
  const typename S::I hlo = S::sll(S::and_(S::srlv(h, S::add_i(lanes, j)), 1), 4);
  const typename S::I hhi = S::sll(S::and_(S::srlv(h, S::add_i(lanes, 16 + j)), 1), 4);
  *lo = S::or_(S::and_(v, 15), hlo);
  *hi = S::or_(S::srl(v, 4), hhi);
}

template <class S>
struct DecQ5_0 {  // d, qh[4], qs[16]: (n5 − 16)·d
  static constexpr int E = 32, B = 22;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const typename S::F d = S::set1(S::h2f(load_u16(b)));
    const uint32_t qh = load_u32(b + 2);
    if constexpr (S::kLut) {  // (n5 − 16)·d for n5 < 16, then n5 ≥ 16
      const typename S::F lo = S::mul(S::cvt(S::sub_i(S::iota(), 16)), d), hi = S::mul(S::iota_f(), d);
      typename S::I q0, q1;
      five_bits<S>(qh, b + 6, 0, &q0, &q1);
      f(0, S::lut32(lo, hi, q0));
      f(16, S::lut32(lo, hi, q1));
      return;
    }
#pragma GCC unroll 2
    for (int j = 0; j < 16; j += S::W) {
      typename S::I lo, hi;
      five_bits<S>(qh, b + 6, j, &lo, &hi);
      f(j, S::mul(S::cvt(S::sub_i(lo, 16)), d));
      f(16 + j, S::mul(S::cvt(S::sub_i(hi, 16)), d));
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

template <class S>
struct DecQ5_1 {  // d, m, qh[4], qs[16]: n5·d + m
  static constexpr int E = 32, B = 24;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const typename S::F d = S::set1(S::h2f(load_u16(b))), m = S::set1(S::h2f(load_u16(b + 2)));
    const uint32_t qh = load_u32(b + 4);
    if constexpr (S::kLut) {  // n5·d + m for n5 < 16, then n5 ≥ 16
      const typename S::F lo = S::mul_add(S::iota_f(), d, m), hi = S::mul_add(S::cvt(S::add_i(S::iota(), 16)), d, m);
      typename S::I q0, q1;
      five_bits<S>(qh, b + 8, 0, &q0, &q1);
      f(0, S::lut32(lo, hi, q0));
      f(16, S::lut32(lo, hi, q1));
      return;
    }
#pragma GCC unroll 2
    for (int j = 0; j < 16; j += S::W) {
      typename S::I lo, hi;
      five_bits<S>(qh, b + 8, j, &lo, &hi);
      f(j, S::mul_add(S::cvt(lo), d, m));
      f(16 + j, S::mul_add(S::cvt(hi), d, m));
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// --- 256-element super-blocks (layouts and formulas: gguf_quant.cpp).

// Q2_K: scales[16] @0, qs[64] @16, d @80, dmin @82. Element 128h + 32p + 16s + l (half h,
// pair p, s = 0/1, l < 16) is the 2-bit field at bit 2p of qs[32h + 16s + l], times
// d·(sc & 15), minus dmin·(sc >> 4), sc = scales[8h + 2p + s].
template <class S>
struct DecQ2_K {
  static constexpr int E = 256, B = 84;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const float d = S::h2f(load_u16(b + 80)), dmin = S::h2f(load_u16(b + 82));
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s)
#pragma GCC unroll 2
        for (int l = 0; l < 16; l += S::W) {
          const typename S::I v = S::u8(b + 16 + 32 * h + 16 * s + l);
#pragma GCC unroll 4
          for (int p = 0; p < 4; ++p) {
            const uint8_t sc = b[8 * h + 2 * p + s];
            const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
            const typename S::F q = S::cvt(S::and_(S::srl(v, 2 * p), 3));
            f(128 * h + 32 * p + 16 * s + l, S::mul_sub(S::set1(dl), q, S::set1(ml)));
          }
        }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// Q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108. Sixteen six-bit scales s_i; the
// 2-bit fields as in Q2_K; the third bit of element (h, p, k = 16s + l) is bit 4h + p of
// hmask[k], clear meaning −4. Element value d·(s_i − 32)·q3, i = 8h + 2p + s.
template <class S>
struct DecQ3_K {
  static constexpr int E = 256, B = 110;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const uint8_t* sb = b + 96;
    const float d = S::h2f(load_u16(b + 108));
    float dl[16];
    for (int i = 0; i < 16; ++i) {
      const int low = i < 8 ? (sb[i] & 0xF) : (sb[i - 8] >> 4);
      const int high = (sb[8 + i % 4] >> (2 * (i / 4))) & 3;
      dl[i] = d * ((low | (high << 4)) - 32);
    }
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s)
#pragma GCC unroll 2
        for (int l = 0; l < 16; l += S::W) {
          const int k = 16 * s + l;
          const typename S::I v = S::u8(b + 32 + 32 * h + k), hm = S::u8(b + k);
#pragma GCC unroll 4
          for (int p = 0; p < 4; ++p) {
            const typename S::I q = S::and_(S::srl(v, 2 * p), 3);
            const typename S::I hb = S::and_(S::srl(hm, 4 * h + p), 1);
            const typename S::I q3 = S::sub_i(S::or_(q, S::sll(hb, 2)), 4);  // q − (bit ? 0 : 4)
            f(128 * h + 32 * p + k, S::mul(S::set1(dl[8 * h + 2 * p + s]), S::cvt(q3)));
          }
        }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// The eight six-bit (scale, min) pairs of Q4_K / Q5_K packed in 12 bytes.
inline void scale_min_k4(const uint8_t* q, int i, int* sc, int* m) {
  if (i < 4) {
    *sc = q[i] & 63;
    *m = q[i + 4] & 63;
  } else {
    *sc = (q[i + 4] & 0xF) | ((q[i - 4] >> 6) << 4);
    *m = (q[i + 4] >> 4) | ((q[i] >> 6) << 4);
  }
}

// Q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16. Chunk c (64 elements) reads qs[32c ..
// 32c + 32): low nibbles for its first 32 elements (pair 2c), high for the next (2c + 1).
// Element value (d·sc)·n − dmin·m.
template <class S>
struct DecQ4_K {
  static constexpr int E = 256, B = 144;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const float d = S::h2f(load_u16(b)), dmin = S::h2f(load_u16(b + 2));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      int sc, m;
      scale_min_k4(b + 4, 2 * c, &sc, &m);
      const typename S::F d1 = S::set1(d * sc), m1 = S::set1(dmin * m);
      scale_min_k4(b + 4, 2 * c + 1, &sc, &m);
      const typename S::F d2 = S::set1(d * sc), m2 = S::set1(dmin * m);
      if constexpr (S::kLut) {  // (d·sc)·n − dmin·m for n < 16, per sub-block
        const typename S::F t1 = S::mul_sub(d1, S::iota_f(), m1), t2 = S::mul_sub(d2, S::iota_f(), m2);
#pragma GCC unroll 2
        for (int l = 0; l < 32; l += S::W) {
          const typename S::I v = S::u8(b + 16 + 32 * c + l);
          f(64 * c + l, S::lut16(t1, v));
          f(64 * c + 32 + l, S::lut16(t2, S::srl(v, 4)));
        }
        continue;
      }
#pragma GCC unroll 4
      for (int l = 0; l < 32; l += S::W) {
        const typename S::I v = S::u8(b + 16 + 32 * c + l);
        f(64 * c + l, S::mul_sub(d1, S::cvt(S::and_(v, 15)), m1));
        f(64 * c + 32 + l, S::mul_sub(d2, S::cvt(S::srl(v, 4)), m2));
      }
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// Q5_K: d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48. As Q4_K, plus 16 when bit
// (sub-block index) of qh[l] is set.
template <class S>
struct DecQ5_K {
  static constexpr int E = 256, B = 176;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const float d = S::h2f(load_u16(b)), dmin = S::h2f(load_u16(b + 2));
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      int sc, m;
      scale_min_k4(b + 4, 2 * c, &sc, &m);
      const typename S::F d1 = S::set1(d * sc), m1 = S::set1(dmin * m);
      scale_min_k4(b + 4, 2 * c + 1, &sc, &m);
      const typename S::F d2 = S::set1(d * sc), m2 = S::set1(dmin * m);
      typename S::F t1lo, t1hi, t2lo, t2hi;  // (d·sc)·n5 − dmin·m for n5 < 16, then n5 ≥ 16
      if constexpr (S::kLut) {
        const typename S::F upper = S::cvt(S::add_i(S::iota(), 16));
        t1lo = S::mul_sub(d1, S::iota_f(), m1);
        t1hi = S::mul_sub(d1, upper, m1);
        t2lo = S::mul_sub(d2, S::iota_f(), m2);
        t2hi = S::mul_sub(d2, upper, m2);
      }
#pragma GCC unroll 4
      for (int l = 0; l < 32; l += S::W) {
        const typename S::I v = S::u8(b + 48 + 32 * c + l), hv = S::u8(b + 16 + l);
        const typename S::I lo = S::or_(S::and_(v, 15), S::sll(S::and_(S::srl(hv, 2 * c), 1), 4));
        const typename S::I hi = S::or_(S::srl(v, 4), S::sll(S::and_(S::srl(hv, 2 * c + 1), 1), 4));
        if constexpr (S::kLut) {
          f(64 * c + l, S::lut32(t1lo, t1hi, lo));
          f(64 * c + 32 + l, S::lut32(t2lo, t2hi, hi));
        } else {
          f(64 * c + l, S::mul_sub(d1, S::cvt(lo), m1));
          f(64 * c + 32 + l, S::mul_sub(d2, S::cvt(hi), m2));
        }
      }
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// Q6_K: ql[128] @0, qh[64] @128, scales[16] int8 @192, d @208. Half h (128 elements) reads
// ql[64h ..], qh[32h ..], scales[8h ..]; for l < 32 four six-bit values, each minus 32, at
// l, l + 32, l + 64, l + 96, times (d·scales[l / 16 + 2k]) for the one at l + 32k.
template <class S>
struct DecQ6_K {
  static constexpr int E = 256, B = 210;
  template <class Fn>
  static void run(const uint8_t* b, Fn&& f) {
    const float d = S::h2f(load_u16(b + 208));
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + 64 * h;
      const uint8_t* qh = b + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h);
#pragma GCC unroll 4
      for (int l = 0; l < 32; l += S::W) {
        const int is = l / 16;
        const typename S::I a = S::u8(ql + l), c = S::u8(ql + 32 + l), hh = S::u8(qh + l);
        const typename S::I q1 = S::sub_i(S::or_(S::and_(a, 15), S::sll(S::and_(hh, 3), 4)), 32);
        const typename S::I q2 = S::sub_i(S::or_(S::and_(c, 15), S::sll(S::and_(S::srl(hh, 2), 3), 4)), 32);
        const typename S::I q3 = S::sub_i(S::or_(S::srl(a, 4), S::sll(S::and_(S::srl(hh, 4), 3), 4)), 32);
        const typename S::I q4 = S::sub_i(S::or_(S::srl(c, 4), S::sll(S::srl(hh, 6), 4)), 32);
        f(128 * h + l, S::mul(S::set1(d * sc[is]), S::cvt(q1)));
        f(128 * h + l + 32, S::mul(S::set1(d * sc[is + 2]), S::cvt(q2)));
        f(128 * h + l + 64, S::mul(S::set1(d * sc[is + 4]), S::cvt(q3)));
        f(128 * h + l + 96, S::mul(S::set1(d * sc[is + 6]), S::cvt(q4)));
      }
    }
  }
  static float one(const uint8_t*, int64_t) { return 0.f; }
};

// --- the two kernels, for one decoder.

// y[i·ldy + r] = x_i · W_r, M rows of x, each row's sum in A accumulators (vector w at
// element offset off goes to accumulator (off / W) mod A) so that M·A ≥ S::kChains sums are
// in flight: one chain of fused multiply-adds would wait on each one's latency.
template <class S, class D, int M>
void matvec_m_registers(const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, const float* x, int64_t ldx,
                        float* y, int64_t ldy) {
  constexpr int A = S::kChains / M > 1 ? S::kChains / M : 1;
  const int64_t calls = K / D::E, done = calls * D::E;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    typename S::F acc[M][A];
    for (int i = 0; i < M; ++i)
      for (int a = 0; a < A; ++a) acc[i][a] = S::zero();
    for (int64_t c = 0; c < calls; ++c) {
      const float* xc = x + c * D::E;
      prefetch_ahead<D::B>(row + c * D::B, row_bytes);
      D::run(row + c * D::B, [&](int off, typename S::F w) {
        const int a = (off / S::W) % A;
        for (int i = 0; i < M; ++i) acc[i][a] = S::fma(S::loadu(xc + i * ldx + off), w, acc[i][a]);
      });
    }
    for (int i = 0; i < M; ++i) {
      for (int a = 1; a < A; ++a) acc[i][0] = S::add(acc[i][0], acc[i][a]);
      float s = S::hsum(acc[i][0]);
      for (int64_t k = done; k < K; ++k) s += x[i * ldx + k] * D::one(row, k);
      y[i * ldy + r] = s;
    }
  }
}

// The same with each call's E weights stored to a small buffer on the stack (at most 256
// floats, in L1) and dotted with x from there in S::W partial sums per row: for the
// portable family, whose vectors are arrays the compiler keeps in registers only in
// simple loops.
template <class S, class D, int M>
void matvec_m_buffered(const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, const float* x, int64_t ldx,
                       float* y, int64_t ldy) {
  constexpr int W = S::W;
  const int64_t calls = K / D::E, done = calls * D::E;
  float wbuf[D::E];
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    float acc[M][W] = {};
    for (int64_t c = 0; c < calls; ++c) {
      D::run(row + c * D::B, [&](int off, const typename S::F& w) { S::storeu(wbuf + off, w); });
      for (int i = 0; i < M; ++i) {
        const float* xc = x + i * ldx + c * D::E;
        for (int e = 0; e < D::E; e += W)
          for (int l = 0; l < W; ++l) acc[i][l] += xc[e + l] * wbuf[e + l];
      }
    }
    for (int i = 0; i < M; ++i) {
      float s = 0.f;
      for (int l = 0; l < W; ++l) s += acc[i][l];
      for (int64_t k = done; k < K; ++k) s += x[i * ldx + k] * D::one(row, k);
      y[i * ldy + r] = s;
    }
  }
}

template <class S, class D, int M>
void matvec_m(const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, const float* x, int64_t ldx, float* y,
              int64_t ldy) {
  if constexpr (S::kInRegisters)
    matvec_m_registers<S, D, M>(rows, row_bytes, n, K, x, ldx, y, ldy);
  else
    matvec_m_buffered<S, D, M>(rows, row_bytes, n, K, x, ldx, y, ldy);
}

template <class S, class D>
void matvec_type(const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, const float* x, int64_t ldx, int M,
                 float* y, int64_t ldy) {
  switch (M) {
    case 1: matvec_m<S, D, 1>(rows, row_bytes, n, K, x, ldx, y, ldy); break;
    case 2: matvec_m<S, D, 2>(rows, row_bytes, n, K, x, ldx, y, ldy); break;
    case 3: matvec_m<S, D, 3>(rows, row_bytes, n, K, x, ldx, y, ldy); break;
    default: matvec_m<S, D, 4>(rows, row_bytes, n, K, x, ldx, y, ldy); break;
  }
}

template <class S, class D>
void decode_type(const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, float* dst, int64_t ld) {
  const int64_t calls = K / D::E, done = calls * D::E;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * row_bytes;
    float* out = dst + r * ld;
    for (int64_t c = 0; c < calls; ++c) {
      float* oc = out + c * D::E;
      D::run(row + c * D::B, [&](int off, typename S::F w) { S::storeu(oc + off, w); });
    }
    for (int64_t k = done; k < K; ++k) out[k] = D::one(row, k);
  }
}

// The entry points of a family. The caller has checked that `type` is one of the supported
// types; any other does nothing.
template <class S>
void matvec(GgmlType type, const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, const float* x, int64_t ldx,
            int M, float* y, int64_t ldy) {
  switch (type) {
    case GgmlType::F32: return matvec_type<S, DecF32<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::F16: return matvec_type<S, DecF16<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::BF16: return matvec_type<S, DecBF16<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q8_0: return matvec_type<S, DecQ8_0<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q4_0: return matvec_type<S, DecQ4_0<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q4_1: return matvec_type<S, DecQ4_1<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q5_0: return matvec_type<S, DecQ5_0<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q5_1: return matvec_type<S, DecQ5_1<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q2_K: return matvec_type<S, DecQ2_K<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q3_K: return matvec_type<S, DecQ3_K<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q4_K: return matvec_type<S, DecQ4_K<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q5_K: return matvec_type<S, DecQ5_K<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::Q6_K: return matvec_type<S, DecQ6_K<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
    case GgmlType::MXFP4: return matvec_type<S, DecMXFP4<S>>(rows, row_bytes, n, K, x, ldx, M, y, ldy);
  }
}

template <class S>
void decode(GgmlType type, const uint8_t* rows, int64_t row_bytes, int64_t n, int64_t K, float* dst, int64_t ld) {
  switch (type) {
    case GgmlType::F32: return decode_type<S, DecF32<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::F16: return decode_type<S, DecF16<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::BF16: return decode_type<S, DecBF16<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q8_0: return decode_type<S, DecQ8_0<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q4_0: return decode_type<S, DecQ4_0<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q4_1: return decode_type<S, DecQ4_1<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q5_0: return decode_type<S, DecQ5_0<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q5_1: return decode_type<S, DecQ5_1<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q2_K: return decode_type<S, DecQ2_K<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q3_K: return decode_type<S, DecQ3_K<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q4_K: return decode_type<S, DecQ4_K<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q5_K: return decode_type<S, DecQ5_K<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::Q6_K: return decode_type<S, DecQ6_K<S>>(rows, row_bytes, n, K, dst, ld);
    case GgmlType::MXFP4: return decode_type<S, DecMXFP4<S>>(rows, row_bytes, n, K, dst, ld);
  }
}

}  // namespace
}  // namespace attnviz::stored
