// stored_product (core/engine/stored_product.h) against an independent computation: the rows
// converted with dequantize() (core/model/gguf_quant.cpp), then a double-precision loop. For
// every supported type, every kernel family this CPU runs (set_stored_kernel), both schemes
// (few rows of x: the matrix–vector kernel; many: decoded panels through gemm_bt), odd
// shapes, strides and offsets, and one and two threads. And exactness: a unit vector e_k
// for x gives back the k-th dequantized weight of every row, bit for bit.
//
// Letters: M rows of x, K values per weight row, n weight rows used from row r0.
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/engine/stored_product.h"
#include "core/model/gguf_quant.h"
#include "core/model/stored_rows.h"
#include "tests/stored_test_util.h"

namespace attnviz {
namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4};

std::string type_name(GgmlType t) { return ggml_type_info(t).name; }
int block_elems(GgmlType t) { return ggml_type_info(t).block_elems; }



// The kernel families this CPU runs (set_stored_kernel says which); the best one is set again
// afterwards.
std::vector<std::string> families() {
  std::vector<std::string> out;
  for (const char* name : {"portable", "avx2", "avx512"})
    if (set_stored_kernel(name)) out.push_back(name);
  set_stored_kernel("");
  return out;
}

struct Case {
  GgmlType type;
  int64_t M, K, rows, r0, n, ldx, ldy;
  int threads;
};

std::string describe(const std::string& family, const Case& c) {
  return family + " " + type_name(c.type) + " M=" + std::to_string(c.M) + " K=" + std::to_string(c.K) +
         " r0=" + std::to_string(c.r0) + " n=" + std::to_string(c.n) + " threads=" + std::to_string(c.threads);
}

// Runs one case and compares every output with the double-precision reference:
// |y − ref| ≤ 1e-5 · Σ_k |x_k · w_k| + 1e-30. The padding of y (ldy > n) must stay untouched.
// Returns the number of mismatches (each reported).
int check_case(const std::string& family, const Case& c, unsigned seed) {
  const Matrix m = random_matrix(c.type, c.rows, c.K, seed);
  const std::vector<float> x = random_x(c.M, c.K, c.ldx, seed + 1);
  std::vector<float> wf(static_cast<size_t>(c.n * c.K));
  for (int64_t r = 0; r < c.n; ++r) dequantize(c.type, m.w.data + (c.r0 + r) * m.w.row_bytes, c.K, &wf[r * c.K]);

  const float sentinel = -12345.f;
  std::vector<float> y(static_cast<size_t>(c.M * c.ldy), sentinel);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(c.threads);
  stored_product(x.data(), c.M, c.ldx, m.w, y.data(), c.ldy, c.r0, c.n);
  omp_set_num_threads(saved);

  int bad = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t r = 0; r < c.n; ++r) {
      double ref = 0, scale = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double p = static_cast<double>(x[i * c.ldx + k]) * wf[r * c.K + k];
        ref += p;
        scale += std::fabs(p);
      }
      const float got = y[i * c.ldy + r];
      if (!(std::fabs(got - ref) <= 1e-5 * scale + 1e-30) && bad++ < 5)
        ADD_FAILURE() << describe(family, c) << ": y[" << i << "][" << r << "] = " << got << ", reference " << ref
                      << " (scale " << scale << ")";
    }
    for (int64_t r = c.n; r < c.ldy; ++r)
      if (y[i * c.ldy + r] != sentinel && bad++ < 5)
        ADD_FAILURE() << describe(family, c) << ": wrote y[" << i << "][" << r << "], past n";
  }
  return bad;
}

// K of 1 to 3 blocks; the float types (blocks of 1) get lengths that end in a partial vector.
int64_t length(GgmlType t, int blocks) {
  if (block_elems(t) == 1) return blocks == 1 ? 1 : blocks == 2 ? 19 : 67;
  return int64_t{blocks} * block_elems(t);
}

TEST(StoredProduct, FamiliesIncludePortableAndNameFollowsChoice) {
  const std::vector<std::string> f = families();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.front(), "portable");
  for (const std::string& name : f) {
    ASSERT_TRUE(set_stored_kernel(name.c_str()));
    EXPECT_EQ(std::string(stored_kernel_name()), name);
  }
  const std::string before = stored_kernel_name();
  EXPECT_FALSE(set_stored_kernel("sse9"));
  EXPECT_FALSE(set_stored_kernel(nullptr));
  EXPECT_EQ(std::string(stored_kernel_name()), before);  // a refused name changes nothing
  EXPECT_TRUE(set_stored_kernel(""));
  EXPECT_EQ(std::string(stored_kernel_name()), f.back());  // the best this CPU runs
#if defined(__x86_64__)
  // F16C read from CPUID leaf 1 (ECX bit 29) here: clang's __builtin_cpu_supports has no "f16c"
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    EXPECT_NE(f.back(), "portable");
  }
#endif
}

// Every case cases(t) gives, for every kernel family this CPU runs and every type: how many
// differ from the reference.
int failures(unsigned seed, const std::function<std::vector<Case>(GgmlType)>& cases) {
  int bad = 0;
  for (const std::string& family : families()) {
    if (!set_stored_kernel(family.c_str())) {
      ADD_FAILURE() << "kernel family " << family << " refused";
      ++bad;
      continue;
    }
    for (GgmlType t : kTypes)
      for (const Case& c : cases(t)) bad += check_case(family, c, seed++);
  }
  set_stored_kernel("");
  return bad;
}

// Small shapes: every type × family × M × K, one and two threads (too small to split, which
// is the point for the tiny models: the calling thread does it all).
TEST(StoredProduct, MatchesReferenceSmallShapes) {
  EXPECT_EQ(failures(1, [](GgmlType t) {
              std::vector<Case> v;
              for (int64_t M : {1, 2, 3, 4, 5, 17, 64})
                for (int blocks = 1; blocks <= 3; ++blocks)
                  for (int threads : {1, 2}) {
                    const int64_t K = length(t, blocks);
                    v.push_back({t, M, K, /*rows*/ 40, /*r0*/ 3, /*n*/ 29, /*ldx*/ K + 3, /*ldy*/ 29 + 5, threads});
                  }
              return v;
            }),
            0);
}

// Long rows (K = 4096) and enough of them that the rows are split over two threads, in both
// schemes (M ≤ 4: matrix–vector; M > 4: panels).
TEST(StoredProduct, MatchesReferenceLongRowsTwoThreads) {
  EXPECT_EQ(failures(1000, [](GgmlType t) {
              std::vector<Case> v;
              for (int64_t M : {1, 3, 5, 64})
                v.push_back({t, M, 4096, /*rows*/ 110, /*r0*/ 5, /*n*/ 99, /*ldx*/ 4096 + 16, /*ldy*/ 99 + 1, 2});
              return v;
            }),
            0);
}

// Called from inside a parallel region (each thread its own product), a product big enough
// to be split stays on its thread and gives the same result.
TEST(StoredProduct, InsideParallelRegion) {
  const Matrix m = random_matrix(GgmlType::Q4_K, 128, 4096, 7);
  const std::vector<float> x = random_x(2, 4096, 4096, 8);
  std::vector<float> want(2 * 128);
  stored_product(x.data(), 2, 4096, m.w, want.data(), 128);
  std::vector<std::vector<float>> got(2, std::vector<float>(2 * 128));
#pragma omp parallel num_threads(2)
  stored_product(x.data(), 2, 4096, m.w, got[omp_get_thread_num()].data(), 128);
  for (const auto& g : got) {
    EXPECT_EQ(g, want);  // same rows, same order of additions
  }
}

// x = e_k gives y[r] = the k-th value of row r exactly as dequantize gives it: through the
// matrix–vector kernel (M = 1, each k) and through the panels (x = the K×K identity).
TEST(StoredProduct, DecodedValuesAreBitIdentical) {
  for (const std::string& family : families()) {
    ASSERT_TRUE(set_stored_kernel(family.c_str()));
    for (GgmlType t : kTypes) {
      const int64_t K = block_elems(t) == 1 ? 37 : 2 * block_elems(t), rows = 9, r0 = 2, n = 7;
      const Matrix m = random_matrix(t, rows, K, 77 + static_cast<unsigned>(t));
      std::vector<float> wf(static_cast<size_t>(n * K));
      m.w.decode_rows(r0, n, wf.data(), K);
      int bad = 0;
      std::vector<float> e(static_cast<size_t>(K), 0.f), y(static_cast<size_t>(n));
      for (int64_t k = 0; k < K; ++k) {
        e[k] = 1.f;
        stored_product(e.data(), 1, K, m.w, y.data(), n, r0, n);
        e[k] = 0.f;
        for (int64_t r = 0; r < n; ++r)
          if (y[r] != wf[r * K + k] && bad++ < 5)
            ADD_FAILURE() << family << " " << type_name(t) << " matvec: w[" << r << "][" << k << "] = " << y[r]
                          << ", dequantize gives " << wf[r * K + k];
      }
      std::vector<float> eye(static_cast<size_t>(K * K), 0.f), yt(static_cast<size_t>(K * n));
      for (int64_t k = 0; k < K; ++k) eye[k * K + k] = 1.f;
      stored_product(eye.data(), K, K, m.w, yt.data(), n, r0, n);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t r = 0; r < n; ++r)
          if (yt[k * n + r] != wf[r * K + k] && bad++ < 5)
            ADD_FAILURE() << family << " " << type_name(t) << " panels: w[" << r << "][" << k << "] = " << yt[k * n + r]
                          << ", dequantize gives " << wf[r * K + k];
      EXPECT_EQ(bad, 0) << family << " " << type_name(t);
    }
  }
  set_stored_kernel("");
}

TEST(StoredProduct, EmptyAndDefaultRange) {
  const Matrix m = random_matrix(GgmlType::Q8_0, 6, 64, 3);
  const std::vector<float> x = random_x(1, 64, 64, 4);
  std::vector<float> y(6, -1.f);
  stored_product(x.data(), 0, 64, m.w, y.data(), 6);     // no rows of x
  stored_product(x.data(), 1, 64, m.w, y.data(), 6, 6);  // no weight rows left from r0 = 6
  EXPECT_EQ(y, std::vector<float>(6, -1.f));
  stored_product(x.data(), 1, 64, m.w, y.data(), 6, 2);  // n < 0: rows 2..5
  std::vector<float> all(6);
  stored_product(x.data(), 1, 64, m.w, all.data(), 6);
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 4), std::vector<float>(all.begin() + 2, all.end()));
  EXPECT_EQ(y[4], -1.f);
}

}  // namespace
}  // namespace attnviz
