// What this CPU runs, asked once by each kernel family's chooser (stored_product.cpp,
// int8_product.cpp).
#pragma once
#include <cstdio>
#include <cstdlib>

namespace attnviz {

// Whether this CPU runs the kernel family `name`: "portable" (always), "avx2" (AVX2, FMA and
// F16C), "avx512" (those and AVX-512F), "avxvnni" (AVX2's and AVX-VNNI), "avx512vnni"
// (AVX2's and AVX-512 F, BW, VL and VNNI). False for any other name.
bool cpu_supports(const char* name);

// The kernel family the environment variable `var` names when it is set and `family` (a name
// to the family, or nullptr when this CPU cannot run it) gives one; else `best`, said once on
// stderr when the variable named another. `names` lists the families for that message.
template <class K>
const K* family_from_env(const char* var, const K* (*family)(const char*), const K* best, const char* names) {
  const char* env = std::getenv(var);
  if (env && *env) {
    if (const K* k = family(env)) return k;
    std::fprintf(stderr, "attnviz: %s=%s is not a kernel family this CPU runs (%s); using %s\n", var, env, names,
                 best->name);
  }
  return best;
}

}  // namespace attnviz
