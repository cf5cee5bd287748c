// The AVX2 kernel family (8 float lanes; FMA for the sums, F16C for fp16). Compiled with
// -mavx2 -mfma -mf16c (and without AVX-512, so it is exactly what an AVX2 CPU runs) whatever
// the rest of the build targets; stored_product.cpp calls it only when the CPU has all three.
#if defined(__x86_64__)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "stored_kernels_avx2.cpp is compiled with -mavx2 -mfma -mf16c (core/CMakeLists.txt)"
#endif
#include <immintrin.h>

#include <cstdint>

#include "core/engine/stored_kernels.h"
#include "core/engine/stored_kernels_impl.h"

namespace attnviz::stored {
namespace {

struct Avx2 : Traits<8, /*kInRegisters*/ true, /*kChains*/ 4, /*kLut*/ false> {
  using F = __m256;
  using I = __m256i;

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float a) { return _mm256_set1_ps(a); }
  static F loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, F a) { _mm256_storeu_ps(p, a); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F mul_add(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }  // exact a·b: rounds as unfused
  static F mul_sub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(F a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  static I u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static I i8(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static I set1i(int32_t a) { return _mm256_set1_epi32(a); }
  static I iota() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
  static I and_(I a, int32_t k) { return _mm256_and_si256(a, _mm256_set1_epi32(k)); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I add_i(I a, int32_t k) { return _mm256_add_epi32(a, _mm256_set1_epi32(k)); }
  static I sub_i(I a, int32_t k) { return _mm256_sub_epi32(a, _mm256_set1_epi32(k)); }
  static I srl(I a, int n) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n)); }
  static I sll(I a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
  static I srlv(I a, I n) { return _mm256_srlv_epi32(a, n); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  // kMxfp4Values[c] for each lane's code c < 16: both halves of the table looked up by c's
  // low 3 bits, the second half taken where bit 3 is set (blendv reads the top bit).
  static F e2m1(I c) {
    const F lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kMxfp4Values), c);
    const F hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kMxfp4Values + 8), c);
    const F top = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28));  // bit 3 → 31
    return _mm256_blendv_ps(lo, hi, top);
  }

  static float h2f(uint16_t h) { return _cvtsh_ss(h); }
  static F f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F bf16(const uint8_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  static F f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};

const Kernels kAvx2 = {"avx2", matvec<Avx2>, decode<Avx2>};

}  // namespace

const Kernels& avx2_kernels() { return kAvx2; }

}  // namespace attnviz::stored
#endif  // __x86_64__
