// The int8 arithmetic's AVX2 kernels (int8_kernels_x86.h): bytes multiplied with maddubs
// (unsigned × signed byte pairs summed into int16) and madd (int16 pairs summed into int32,
// times 1 or an integer scale). Compiled with -mavx2 -mfma -mf16c (core/CMakeLists.txt);
// int8_product.cpp calls it only when the CPU has all three.
#if defined(__x86_64__)
#include "core/engine/int8_kernels_x86.h"

namespace attnviz::int8 {
namespace {

struct Avx2Ops {
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static __m256i dot_scaled_acc(__m256i acc, __m256i u, __m256i s, __m256i scale) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale));
  }
};

const Kernels kAvx2 = {"avx2", matvec<Avx2Ops>};

}  // namespace

const Kernels& avx2_kernels() { return kAvx2; }

}  // namespace attnviz::int8
#endif  // __x86_64__
