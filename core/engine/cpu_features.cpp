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
#endif
  return false;
}

}  // namespace attnviz
