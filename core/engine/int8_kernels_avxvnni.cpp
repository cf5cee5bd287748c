// The int8 arithmetic's AVX-VNNI kernels (int8_kernels_x86.h): the VEX-encoded vpdpbusd
// (unsigned × signed bytes summed four at a time straight into int32, added to an
// accumulator) and vpdpwssd (int16 pairs times int16 scales, summed into int32 and added),
// on 256-bit vectors: Intel's cores since Alder Lake, AMD's since Zen 5. Compiled with -mavx2
// -mfma -mf16c -mavxvnni (core/CMakeLists.txt); int8_product.cpp calls it only when the CPU
// has all four.
#if defined(__x86_64__)
#if !defined(__AVXVNNI__)
#error "int8_kernels_avxvnni.cpp is compiled with -mavxvnni (core/CMakeLists.txt)"
#endif
#include "core/engine/int8_kernels_x86.h"

namespace attnviz::int8 {
namespace {

struct AvxVnniOps {
  static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s); }
  static __m256i dot_scaled_acc(__m256i acc, __m256i u, __m256i s, __m256i scale) {
    return _mm256_dpwssd_avx_epi32(acc, _mm256_maddubs_epi16(u, s), scale);
  }
};

const Kernels kAvxVnni = {"avxvnni", matvec<AvxVnniOps>};

}  // namespace

const Kernels& avxvnni_kernels() { return kAvxVnni; }

}  // namespace attnviz::int8
#endif  // __x86_64__
