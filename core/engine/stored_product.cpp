#include "core/engine/stored_product.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace attnviz {

// Portable first version: each weight row decoded into a row buffer, then dotted with every
// row of x. (The vectorised kernels replace this.)
void stored_product(const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y, int64_t ldy, int64_t r0,
                    int64_t n) {
  if (n < 0) n = w.rows - r0;
  const int64_t K = w.cols;
#pragma omp parallel if (n * K > (1 << 18) && !omp_in_parallel())
  {
    std::vector<float> row(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      w.decode_row(r0 + r, row.data());
      for (int64_t i = 0; i < M; ++i) {
        const float* xi = x + i * ldx;
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += xi[k] * row[static_cast<size_t>(k)];
        y[i * ldy + r] = s;
      }
    }
  }
}

const char* stored_kernel_name() { return "portable"; }

bool set_stored_kernel(const char* name) { return name && (!*name || std::strcmp(name, "portable") == 0); }

}  // namespace attnviz
