// The int8 arithmetic (core/engine/int8_product.h) against independent computations:
//   - the activation quantizer against its rule (d = max|x| / 127, |x − d·q| ≤ d / 2, the
//     sums of q);
//   - int8_product (one to four rows of x: the integer kernels) and stored_product in int8
//     mode (more rows: float32 products of the rounded activations), for every type with int8
//     kernels, every int8 kernel family this CPU runs, odd shapes, offsets, strides, one and
//     two threads, against a
//     double-precision loop over the same quantized activations and the weights
//     dequantize() gives: exact up to float rounding (tolerance below);
//   - against the float32 product: within the bound the activation's rounding allows,
//     Σ_k |w_k|·d_b(k) / 2;
//   - the setting: stored_product follows set_arith for the int8 types and nothing else.
//
// Letters: M rows of x, K values per weight row, n weight rows used from row r0.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/engine/int8_kernels.h"
#include "core/engine/int8_product.h"
#include "core/engine/stored_product.h"
#include "core/error.h"
#include "tests/stored_test_util.h"

namespace attnviz {
namespace {

const GgmlType kInt8Types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4};

std::string name_of(GgmlType t) { return ggml_type_info(t).name; }

// Sets the arithmetic for one test and puts f32 back after it.
struct ArithScope {
  explicit ArithScope(Arith a) { set_arith(a); }
  ~ArithScope() { set_arith(Arith::F32); }
};

std::vector<std::string> int8_families() {
  std::vector<std::string> out;
  for (const char* name : {"portable", "avx2", "avxvnni", "avx512vnni"})
    if (set_int8_kernel(name)) out.push_back(name);
  set_int8_kernel("");
  return out;
}

// Row r of w as doubles (the values dequantize gives).
std::vector<double> weight_row(const StoredRows& w, int64_t r) {
  std::vector<float> f(static_cast<size_t>(w.cols));
  w.decode_row(r, f.data());
  return std::vector<double>(f.begin(), f.end());
}

TEST(Int8Quantize, FollowsItsRule) {
  for (int B : {32, 256}) {
    const int64_t K = 4 * B;
    std::vector<float> x = random_x(1, K, K, 7u + B);
    for (int j = 0; j < B; ++j) x[static_cast<size_t>(B + j)] = 0.f;  // block 1: zeros
    x[static_cast<size_t>(2 * B + 3)] = -1e-30f;                      // a tiny but non-zero block
    for (int j = 0; j < B; ++j) x[static_cast<size_t>(2 * B + j)] = j == 3 ? -1e-30f : 0.f;
    std::vector<int8_t> q(static_cast<size_t>(K));
    std::vector<float> d(static_cast<size_t>(K / B));
    std::vector<int32_t> sums(static_cast<size_t>(K / 32));
    int8::quantize_row(x.data(), K, B, q.data(), d.data(), sums.data());
    for (int64_t b = 0; b < K / B; ++b) {
      float amax = 0.f;
      int qmax = 0;
      for (int j = 0; j < B; ++j) {
        amax = std::max(amax, std::fabs(x[static_cast<size_t>(b * B + j)]));
        qmax = std::max(qmax, std::abs(static_cast<int>(q[static_cast<size_t>(b * B + j)])));
      }
      EXPECT_EQ(d[static_cast<size_t>(b)], amax / 127.f) << "B " << B << " block " << b;
      EXPECT_EQ(qmax, amax > 0.f ? 127 : 0) << "B " << B << " block " << b;
      for (int j = 0; j < B; ++j) {
        const double xv = x[static_cast<size_t>(b * B + j)], qv = q[static_cast<size_t>(b * B + j)];
        EXPECT_LE(std::fabs(xv - double(d[static_cast<size_t>(b)]) * qv),
                  double(d[static_cast<size_t>(b)]) * 0.5 * (1 + 1e-6))
            << "B " << B << " block " << b << " value " << j;
      }
    }
    for (int64_t g = 0; g < K / 32; ++g) {
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += q[static_cast<size_t>(32 * g + j)];
      EXPECT_EQ(sums[static_cast<size_t>(g)], s) << "B " << B << " group " << g;
    }
  }
}

// One product case: int8_product against the double loop over the same quantized x.
void check_case(GgmlType t, int64_t M, int64_t K, int64_t rows, int64_t r0, int64_t n, int threads, unsigned seed) {
  const Matrix m = random_matrix(t, rows, K, seed);
  const int64_t ldx = K + 3, ldy = n + 5;
  const std::vector<float> x = random_x(M, K, ldx, seed + 1);
  std::vector<float> y(static_cast<size_t>(M * ldy), -7.f);
  omp_set_num_threads(threads);
  if (M <= kInt8Rows) {
    int8_product(x.data(), M, ldx, m.w, y.data(), ldy, r0, n);
  } else {  // many rows: stored_product's float32 products of the rounded activations
    ArithScope s(Arith::Int8);
    stored_product(x.data(), M, ldx, m.w, y.data(), ldy, r0, n);
  }
  omp_set_num_threads(2);

  const int B = int8::act_block(t);
  std::vector<int8_t> q(static_cast<size_t>(K));
  std::vector<float> d(static_cast<size_t>(K / B));
  std::vector<int32_t> sums(static_cast<size_t>(K / 32));
  for (int64_t i = 0; i < M; ++i) {
    int8::quantize_row(x.data() + i * ldx, K, B, q.data(), d.data(), sums.data());
    for (int64_t r = 0; r < n; ++r) {
      const std::vector<double> w = weight_row(m.w, r0 + r);
      double ref = 0, mag = 0, f32 = 0, bound = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double db = d[static_cast<size_t>(k / B)],
                     term = w[static_cast<size_t>(k)] * db * q[static_cast<size_t>(k)];
        ref += term;
        mag += std::fabs(term);
        f32 += w[static_cast<size_t>(k)] * x[static_cast<size_t>(i * ldx + k)];
        bound += std::fabs(w[static_cast<size_t>(k)]) * db * 0.5;
      }
      const double got = y[static_cast<size_t>(i * ldy + r)];
      // Float rounding: a few float32 roundings per block and in the final sums, each
      // relative 2^−24 of at most the sum of magnitudes.
      EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-30)
          << name_of(t) << " M " << M << " K " << K << " row " << r0 + r << " x row " << i << " threads " << threads;
      EXPECT_LE(std::fabs(got - f32), bound * (1 + 1e-5) + 1e-5 * mag)
          << name_of(t) << ": farther from the float32 product than the activation's rounding allows";
    }
    for (int64_t r = n; r < ldy; ++r) EXPECT_EQ(y[static_cast<size_t>(i * ldy + r)], -7.f) << "wrote past n";
  }
}

// q = round(x / d) half away from zero, as std::lround gives it, at and beside the halves:
// with amax = 127, x / d is x itself (id = 127 / 127 = 1).
TEST(Int8Quantize, RoundsHalvesAwayFromZero) {
  std::vector<float> x = {127.f,
                          -127.f,
                          0.5f,
                          -0.5f,
                          1.5f,
                          -1.5f,
                          2.5f,
                          -2.5f,
                          126.5f,
                          -126.5f,
                          0.f,
                          -0.f,
                          std::nextafter(0.5f, 0.f),
                          std::nextafter(-0.5f, 0.f),
                          std::nextafter(0.5f, 1.f),
                          std::nextafter(1.5f, 1.f),
                          std::nextafter(-1.5f, -1.f),
                          std::nextafter(2.5f, 3.f),
                          3.25f,
                          -3.75f,
                          63.5f,
                          -63.5f,
                          100.49999f,
                          -100.50001f};
  for (int k = 0; static_cast<int>(x.size()) < 32; ++k) x.push_back(0.37f * static_cast<float>(k) - 5.f);
  std::vector<int8_t> q(32);
  float d = 0.f;
  int32_t sums = 0;
  int8::quantize_row(x.data(), 32, 32, q.data(), &d, &sums);
  ASSERT_EQ(d, 1.f);
  for (size_t j = 0; j < 32; ++j) EXPECT_EQ(static_cast<long>(q[j]), std::lround(x[j])) << "x = " << x[j];
}

// A block holding an infinity or NaN: its scale carries it (d·q is NaN, not a number that
// looks fine), its q are 0, and the other blocks are quantized as usual.
TEST(Int8Quantize, NonFiniteBlocksStayNonFinite) {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x(64);
    for (size_t j = 0; j < 64; ++j) x[j] = 0.25f * static_cast<float>(j) - 3.f;
    x[40] = bad;  // block 1
    std::vector<int8_t> q(64, 99);
    std::vector<float> d(2);
    std::vector<int32_t> sums(2);
    int8::quantize_row(x.data(), 64, 32, q.data(), d.data(), sums.data());
    EXPECT_FALSE(std::isfinite(d[1])) << bad;
    for (size_t j = 32; j < 64; ++j) EXPECT_EQ(q[j], 0) << bad << " value " << j;
    EXPECT_EQ(sums[1], 0);
    EXPECT_EQ(d[0], 4.75f / 127.f);  // block 0: −3 … 4.75, so max |x| = 4.75
    EXPECT_EQ(q[0], -80);            // −3 · 127 / 4.75 = −80.2
  }
}

TEST(Int8Product, MatchesTheQuantizedReferenceEveryTypeFamilyAndScheme) {
  const std::vector<std::string> fams = int8_families();
  ASSERT_FALSE(fams.empty());
  unsigned seed = 100;
  for (const std::string& fam : fams) {
    ASSERT_TRUE(set_int8_kernel(fam.c_str()));
    EXPECT_EQ(std::string(int8_kernel_name()), fam);
    for (GgmlType t : kInt8Types) {
      const int64_t K = int8::act_block(t) == 256 ? 512 : 96;
      SCOPED_TRACE(fam + " " + name_of(t));
      check_case(t, 1, K, 37, 0, 37, 1, seed++);
      check_case(t, 3, K, 40, 5, 29, 2, seed++);
      check_case(t, 4, K, 19, 2, 17, 1, seed++);
      check_case(t, 9, K, 70, 3, 61, 2, seed++);  // many rows: panels, groups of 4 and a rest of 1
    }
    // A product large enough to split over the team (n·K ≥ 2^18).
    check_case(GgmlType::Q4_K, 2, 2048, 160, 0, 160, 2, seed++);
    check_case(GgmlType::Q8_0, 6, 1024, 300, 0, 300, 2, seed++);
  }
  set_int8_kernel("");
}

TEST(Int8Product, FamiliesAgree) {
  const std::vector<std::string> fams = int8_families();
  if (fams.size() < 2) GTEST_SKIP() << "this CPU runs only the portable int8 kernels";
  for (GgmlType t : kInt8Types) {
    const int64_t K = int8::act_block(t) == 256 ? 768 : 160, n = 23, M = 3;
    const Matrix m = random_matrix(t, n, K, 900u + static_cast<unsigned>(t));
    const std::vector<float> x = random_x(M, K, K, 901u);
    std::vector<std::vector<float>> ys;
    for (const std::string& fam : fams) {
      ASSERT_TRUE(set_int8_kernel(fam.c_str()));
      ys.emplace_back(static_cast<size_t>(M * n));
      int8_product(x.data(), M, K, m.w, ys.back().data(), n, 0, n);
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t r = 0; r < n; ++r) {  // each within float rounding of the sum of magnitudes
        const std::vector<double> w = weight_row(m.w, r);
        double mag = 0;
        for (int64_t k = 0; k < K; ++k) mag += std::fabs(w[static_cast<size_t>(k)] * x[static_cast<size_t>(i * K + k)]);
        const size_t at = static_cast<size_t>(i * n + r);
        for (size_t f = 1; f < fams.size(); ++f)
          EXPECT_NEAR(ys[f][at], ys[0][at], 2e-5 * mag)
              << fams[f] << " " << name_of(t) << " x row " << i << " row " << r;
      }
    // AVX2 and AVX-VNNI compute the same integers (maddubs + madd, or dpbusd / dpwssd, none
    // saturating here) and the same float operations on them in the same order: bit for bit.
    // (AVX-512 VNNI sums the super-block types' floats in 16 lanes: within rounding, above.)
    const auto at = [&](const char* name) { return std::find(fams.begin(), fams.end(), name) - fams.begin(); };
    if (at("avx2") < static_cast<ptrdiff_t>(fams.size()) && at("avxvnni") < static_cast<ptrdiff_t>(fams.size()))
      EXPECT_EQ(ys[static_cast<size_t>(at("avxvnni"))], ys[static_cast<size_t>(at("avx2"))]) << name_of(t);
  }
  set_int8_kernel("");
}

TEST(Int8Product, TheBestFamilyIsTheDefault) {
  const std::vector<std::string> fams = int8_families();  // portable first, then the x86 ones
  ASSERT_TRUE(set_int8_kernel(""));
  const std::string best = int8_kernel_name();
  // The preference: AVX-512 VNNI, then AVX-VNNI, then AVX2, then portable C++.
  std::string want = "portable";
  for (const char* name : {"avx2", "avxvnni", "avx512vnni"})
    for (const std::string& f : fams)
      if (f == name) want = name;
  EXPECT_EQ(best, want);
}

TEST(Int8Product, StoredProductFollowsTheSetting) {
  const int64_t M = 2, K = 256, n = 12;
  const std::vector<float> x = random_x(M, K, K, 5u);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16, GgmlType::Q3_K, GgmlType::MXFP4}) {
    const Matrix m = random_matrix(t, n, K, 11u + static_cast<unsigned>(t));
    std::vector<float> f32(static_cast<size_t>(M * n)), via(static_cast<size_t>(M * n)),
        direct(static_cast<size_t>(M * n));
    stored_product(x.data(), M, K, m.w, f32.data(), n);
    {
      ArithScope s(Arith::Int8);
      EXPECT_EQ(uses_int8(arith(), m.w), int8::supported(t)) << name_of(t);
      stored_product(x.data(), M, K, m.w, via.data(), n);
    }
    if (int8::supported(t)) {
      int8_product(x.data(), M, K, m.w, direct.data(), n, 0, n);
      EXPECT_EQ(via, direct) << name_of(t) << ": int8 mode is int8_product";
      EXPECT_NE(via, f32) << name_of(t) << ": int8 mode changed nothing";
    } else {
      EXPECT_EQ(via, f32) << name_of(t) << ": a type without int8 kernels keeps float32 products";
    }
  }
  EXPECT_EQ(arith(), Arith::F32);
}

TEST(Int8Product, ParsesTheOption) {
  EXPECT_EQ(parse_arith("f32", "--arith"), Arith::F32);
  EXPECT_EQ(parse_arith("int8", "--arith"), Arith::Int8);
  try {
    parse_arith("int4", "--arith");
    FAIL() << "int4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--arith: 'int4' is not f32 or int8"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(arith_name(Arith::Int8), "int8");
  EXPECT_FALSE(set_int8_kernel("avx512vnni-not-a-family"));
}

}  // namespace
}  // namespace attnviz
