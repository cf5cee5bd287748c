#include "core/engine/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstring>

namespace attnviz {

bool cpu_supports(const char* name) {
  if (std::strcmp(name, "portable") == 0) return true;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (std::strcmp(name, "avx2") == 0) return avx2;
  if (std::strcmp(name, "avx512") == 0) return avx2 && __builtin_cpu_supports("avx512f");
  // The VNNI bits from CPUID leaf 7 (compilers differ in which names __builtin_cpu_supports
  // knows): AVX512_VNNI is ECX bit 11 of sub-leaf 0, AVX-VNNI EAX bit 4 of sub-leaf 1. The
  // AVX-512 checks above also ask whether the OS saves the registers.
  if (std::strcmp(name, "avxvnni") == 0)
    return avx2 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4));
  if (std::strcmp(name, "avx512vnni") == 0)
    return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
           (ecx & (1u << 11));
#endif
  return false;
}

}  // namespace attnviz
