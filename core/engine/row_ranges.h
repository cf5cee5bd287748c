// The rows of a matrix–vector product split over the OpenMP team (stored_product.cpp,
// int8_product.cpp): one contiguous range per thread, in whole 16-row steps, so that each
// thread's outputs start on a 64-byte line of y of their own (when y's rows do).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace attnviz {

// run(a, b) for rows [a, b) on each of `team` threads, or run(0, n) on the calling thread
// when team ≤ 1.
template <class Fn>
void for_row_ranges(int64_t n, int team, Fn&& run) {
  if (team <= 1) return run(int64_t{0}, n);
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t a = std::min(n, t * per), b = std::min(n, a + per);
    if (a < b) run(a, b);
  }
}

}  // namespace attnviz
