// The portable kernel family: plain C++ on arrays of 8 lanes, which the compiler vectorises
// for whatever the build targets (SSE2 on any x86-64, NEON on ARM). The fallback on CPUs
// without AVX2 and on other architectures.
#include <cstdint>
#include <cstring>

#include "core/engine/stored_kernels.h"
#include "core/engine/stored_kernels_impl.h"

namespace attnviz::stored {
namespace {

struct Portable : Traits<8, /*kInRegisters*/ false, /*kChains*/ 1, /*kLut*/ false> {
  struct F {
    float v[W];
  };
  struct I {
    int32_t v[W];
  };

  // A vector whose lane l is f(l): every operation below is one of these.
  template <class V, class Fn>
  static V lanes(Fn&& f) {
    V r;
    for (int l = 0; l < W; ++l) r.v[l] = f(l);
    return r;
  }

  static F zero() { return set1(0.f); }
  static F set1(float a) { return lanes<F>([&](int) { return a; }); }
  static F loadu(const float* p) { return lanes<F>([&](int l) { return p[l]; }); }
  static void storeu(float* p, const F& a) { std::memcpy(p, a.v, sizeof a.v); }
  static F add(const F& a, const F& b) { return lanes<F>([&](int l) { return a.v[l] + b.v[l]; }); }
  static F mul(const F& a, const F& b) { return lanes<F>([&](int l) { return a.v[l] * b.v[l]; }); }
  // a·b ± c for a decoded weight: the product is exact (stored_kernels_impl.h), the sum rounds.
  static F mul_add(const F& a, const F& b, const F& c) { return lanes<F>([&](int l) { return a.v[l] * b.v[l] + c.v[l]; }); }
  static F mul_sub(const F& a, const F& b, const F& c) { return lanes<F>([&](int l) { return a.v[l] * b.v[l] - c.v[l]; }); }
  // a·b + c: the sums of x·w.
  static F fma(const F& a, const F& b, const F& c) { return mul_add(a, b, c); }
  static float hsum(const F& a) {
    float s = 0.f;
    for (int l = 0; l < W; ++l) s += a.v[l];
    return s;
  }

  static I u8(const uint8_t* p) { return lanes<I>([&](int l) { return int32_t{p[l]}; }); }
  static I i8(const uint8_t* p) { return lanes<I>([&](int l) { return int32_t{static_cast<int8_t>(p[l])}; }); }
  static I set1i(int32_t a) { return lanes<I>([&](int) { return a; }); }
  static I iota() { return lanes<I>([](int l) { return l; }); }
  static I and_(const I& a, int32_t k) { return lanes<I>([&](int l) { return a.v[l] & k; }); }
  static I or_(const I& a, const I& b) { return lanes<I>([&](int l) { return a.v[l] | b.v[l]; }); }
  static I add_i(const I& a, int32_t k) { return lanes<I>([&](int l) { return a.v[l] + k; }); }
  static I sub_i(const I& a, int32_t k) { return lanes<I>([&](int l) { return a.v[l] - k; }); }
  // Shifts as unsigned 32-bit lanes (the operands are bit fields).
  static I srl(const I& a, int n) { return srlv(a, set1i(n)); }
  static I sll(const I& a, int n) {
    return lanes<I>([&](int l) { return static_cast<int32_t>(static_cast<uint32_t>(a.v[l]) << n); });
  }
  static I srlv(const I& a, const I& n) {
    return lanes<I>([&](int l) { return static_cast<int32_t>(static_cast<uint32_t>(a.v[l]) >> n.v[l]); });
  }
  static F cvt(const I& a) { return lanes<F>([&](int l) { return static_cast<float>(a.v[l]); }); }

  // fp16 → float by its bits, exact like half_to_float (core/model/safetensors.h).
  static float h2f(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {  // zero or subnormal: mant · 2^−24, exact in float
      const float v = static_cast<float>(mant) * 0x1p-24f;
      std::memcpy(&bits, &v, 4);
      bits |= sign;
    } else if (exp == 31) {  // inf / nan
      bits = sign | 0x7f800000u | (mant << 13);
    } else {
      bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static F f16(const uint8_t* p) { return lanes<F>([&](int l) { return h2f(load_u16(p + 2 * l)); }); }
  static F bf16(const uint8_t* p) {
    return lanes<F>([&](int l) {
      const uint32_t bits = static_cast<uint32_t>(load_u16(p + 2 * l)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    });
  }
  static F f32(const uint8_t* p) {
    F r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
};

const Kernels kPortable = {"portable", matvec<Portable>, decode<Portable>};

}  // namespace

const Kernels& portable_kernels() { return kPortable; }

}  // namespace attnviz::stored
