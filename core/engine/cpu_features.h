// What this CPU runs, asked once by each kernel family's chooser (stored_product.cpp,
// int8_product.cpp).
#pragma once

namespace attnviz {

// Whether this CPU runs the kernel family `name`: "portable" (always), "avx2" (AVX2, FMA and
// F16C), "avx512" (those and AVX-512F), "avxvnni" (AVX2's and AVX-VNNI), "avx512vnni"
// (AVX2's and AVX-512 F, BW, VL and VNNI). False for any other name.
bool cpu_supports(const char* name);

}  // namespace attnviz
