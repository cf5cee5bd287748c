// The AVX-512 kernel family (16 float lanes). Compiled with -mavx512f -mavx2 -mfma -mf16c
// whatever the rest of the build targets; stored_product.cpp calls it only when the CPU
// (and the operating system) support AVX-512F as well as the AVX2 family's features.
#if defined(__x86_64__)
#if !defined(__AVX512F__) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "stored_kernels_avx512.cpp is compiled with -mavx512f -mavx2 -mfma -mf16c (core/CMakeLists.txt)"
#endif
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* initialise a variable
// from itself on purpose).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "core/engine/stored_kernels.h"
#include "core/engine/stored_kernels_impl.h"

namespace attnviz::stored {
namespace {

struct Avx512 : Traits<16, /*kInRegisters*/ true, /*kChains*/ 4, /*kLut*/ true> {
  using F = __m512;
  using I = __m512i;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float a) { return _mm512_set1_ps(a); }
  static F loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, F a) { _mm512_storeu_ps(p, a); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F mul_add(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }  // exact a·b: rounds as unfused
  static F mul_sub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(F a) { return _mm512_reduce_add_ps(a); }

  static I u8(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I i8(const uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I set1i(int32_t a) { return _mm512_set1_epi32(a); }
  static I iota() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
  static I and_(I a, int32_t k) { return _mm512_and_si512(a, _mm512_set1_epi32(k)); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I add_i(I a, int32_t k) { return _mm512_add_epi32(a, _mm512_set1_epi32(k)); }
  static I sub_i(I a, int32_t k) { return _mm512_sub_epi32(a, _mm512_set1_epi32(k)); }
  static I srl(I a, int n) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n)); }
  static I sll(I a, int n) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(n)); }
  static I srlv(I a, I n) { return _mm512_srlv_epi32(a, n); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static F iota_f() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
  static F lut16(F table, I idx) { return _mm512_permutexvar_ps(idx, table); }
  static F lut32(F lo, F hi, I idx) { return _mm512_permutex2var_ps(lo, idx, hi); }

  static float h2f(uint16_t h) { return _cvtsh_ss(h); }
  static F f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F bf16(const uint8_t* p) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
  static F f32(const uint8_t* p) { return _mm512_loadu_ps(p); }
};

const Kernels kAvx512 = {"avx512", matvec<Avx512>, decode<Avx512>};

}  // namespace

const Kernels& avx512_kernels() { return kAvx512; }

}  // namespace attnviz::stored
#endif  // __x86_64__
