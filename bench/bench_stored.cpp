// Products that read weights where they lie (core/engine/stored_product.h), on a 4096×4096
// weight matrix (rows × cols) of random valid blocks of each type:
//   Matvec/TYPE   y (1, 4096) = x (1, 4096) · Wᵀ: appending a token. bytes_per_second counts
//                 the weight bytes read (the matrix's size in its type).
//   Full/TYPE     y (512, 4096) = x (512, 4096) · Wᵀ: a full pass. GFLOP/s = 2·M·N·K / time.
//   *_gemm_bt_f32 the same products with a float32 matrix through gemm_bt (core/engine/ops.h).
//   Int8Matvec/TYPE, Int8Full/TYPE  the same in the int8 arithmetic (core/engine/int8_product.h:
//                 the activations quantized per block, integer dot products; the label
//                 names the int8 kernel family, ATTNVIZ_INT8_KERNEL=portable forces that one).
//   ReadBandwidth summing a float array of the Q4_K matrix's size and of 512 MiB on the
//                 team: the memory speed the matvec is up against.
// The kernel family is the CPU's best unless ATTNVIZ_STORED_KERNEL says (avx512, avx2,
// portable); its name is each line's label. Threads: OMP_NUM_THREADS.
//
//   OMP_NUM_THREADS=2 ATTNVIZ_STORED_KERNEL=avx2 build/bench/attnviz_bench_stored
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/engine/int8_product.h"
#include "core/engine/ops.h"
#include "core/engine/stored_product.h"
#include "core/model/gguf_quant.h"
#include "core/model/stored_rows.h"

namespace attnviz {
namespace {

constexpr int64_t kRows = 4096, kCols = 4096, kFullM = 512;
constexpr int64_t kQ4KBytes = kRows / 256 * kCols * 144;  // the Q4_K matrix's size


// A kRows × kCols matrix of type t: random bytes with finite fp16 fields (values of about
// ±0.01..1 for the float types), made once per type.
const StoredRows& weights(GgmlType t) {
  static std::map<GgmlType, StoredRows> cache;
  StoredRows& w = cache[t];
  if (!w.empty()) return w;
  std::mt19937 rng(static_cast<unsigned>(t) + 1);
  std::uniform_int_distribution<int> byte(0, 255), mant(0, 1023), sign(0, 1), exp16(9, 14);
  auto half = [&] { return static_cast<uint16_t>(sign(rng) << 15 | exp16(rng) << 10 | mant(rng)); };
  w.type = t;
  w.rows = kRows;
  w.cols = kCols;
  w.row_bytes = stored_row_bytes(t, kCols, "bench");
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(w.bytes()));
  std::vector<uint8_t>& b = *bytes;
  if (t == GgmlType::F32) {
    std::normal_distribution<float> nd(0.f, 0.1f);
    for (size_t i = 0; i < b.size(); i += 4) {
      const float v = nd(rng);
      std::memcpy(&b[i], &v, 4);
    }
  } else if (t == GgmlType::F16 || t == GgmlType::BF16) {
    for (size_t i = 0; i < b.size(); i += 2) {
      uint16_t h = half();
      if (t == GgmlType::BF16) {  // the same value's upper half as bfloat16
        const uint32_t e = (h >> 10) & 31, bits = (h & 0x8000u) << 16 | (e + 112) << 23 | (h & 0x3ffu) << 13;
        h = static_cast<uint16_t>(bits >> 16);
      }
      b[i] = h & 0xff;
      b[i + 1] = h >> 8;
    }
  } else {
    for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
    for (size_t blk = 0; blk < b.size(); blk += ggml_type_info(t).block_bytes)
      for (int at : ggml_scale_fields(t)) {
        const uint16_t h = half();
        b[blk + at] = h & 0xff;
        b[blk + at + 1] = h >> 8;
      }
  }
  w.data = b.data();
  w.keep = bytes;
  w.origin = std::string("bench ") + ggml_type_info(t).name;
  return w;
}

std::vector<float> random_floats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = nd(rng);
  return v;
}

// The kRows × kCols float32 matrix of weights(F32), for the gemm_bt baselines.
const float* f32_matrix() { return reinterpret_cast<const float*>(weights(GgmlType::F32).data); }

// Times product(x, M, y) on M rows of random input (x (M, kCols) → y (M, kRows)): bytes of
// weights per second for one row, GFLOP/s for many.
template <class Product>
void time_rows(benchmark::State& st, int64_t M, int64_t weight_bytes, const std::string& label, Product product) {
  const std::vector<float> x = random_floats(M * kCols, M == 1 ? 1 : 2);
  std::vector<float> y(static_cast<size_t>(M) * kRows);
  for (auto _ : st) {
    product(x.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  if (M == 1) st.SetBytesProcessed(st.iterations() * weight_bytes);
  else st.counters["GFLOP/s"] = benchmark::Counter(2e-9 * M * kRows * kCols, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(label);
}

void stored_rows(benchmark::State& st, GgmlType t, int64_t M) {
  const StoredRows& w = weights(t);
  time_rows(st, M, w.bytes(), stored_kernel_name(),
            [&](const float* x, int64_t m, float* y) { stored_product(x, m, kCols, w, y, kRows); });
}
void f32_rows(benchmark::State& st, int64_t M) {
  const float* w = f32_matrix();
  time_rows(st, M, kRows * kCols * 4, blas_name(),
            [&](const float* x, int64_t m, float* y) { gemm_bt(x, m, kCols, kCols, w, kRows, kCols, y, kRows); });
}

void int8_rows(benchmark::State& st, GgmlType t, int64_t M) {
  const StoredRows& w = weights(t);
  if (const char* k = std::getenv("ATTNVIZ_INT8_KERNEL")) set_int8_kernel(k);
  time_rows(st, M, w.bytes(), int8_kernel_name(),
            [&](const float* x, int64_t m, float* y) { int8_product(x, m, kCols, w, y, kRows, 0, kRows); });
}

void BM_Matvec(benchmark::State& st, GgmlType t) { stored_rows(st, t, 1); }
void BM_Int8Matvec(benchmark::State& st, GgmlType t) { int8_rows(st, t, 1); }
void BM_Int8Full(benchmark::State& st, GgmlType t) { int8_rows(st, t, kFullM); }
void BM_Full(benchmark::State& st, GgmlType t) { stored_rows(st, t, kFullM); }
void BM_Matvec_gemm_bt_f32(benchmark::State& st) { f32_rows(st, 1); }
void BM_Full_gemm_bt_f32(benchmark::State& st) { f32_rows(st, kFullM); }

// Sums st.range(0) bytes of floats on the team: the read bandwidth of that working set.
void BM_ReadBandwidth(benchmark::State& st) {
  const int64_t n = st.range(0) / 4;
  const std::vector<float> a = random_floats(n, 3);
  const float* p = a.data();
  for (auto _ : st) {
    float total = 0.f;
#pragma omp parallel reduction(+ : total)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = n / 64 * t / nt * 64, end = n / 64 * (t + 1) / nt * 64;
      float s[64] = {};  // independent sums, so that the loop vectorises without reassociation
      for (int64_t i = begin; i < end; i += 64)
        for (int l = 0; l < 64; ++l) s[l] += p[i + l];
      for (float v : s) total += v;
    }
    benchmark::DoNotOptimize(total);
  }
  st.SetBytesProcessed(st.iterations() * n * 4);
}

#define STORED_CASES(BM, ...)                               \
  BENCHMARK_CAPTURE(BM, Q4_K, GgmlType::Q4_K)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q6_K, GgmlType::Q6_K)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q8_0, GgmlType::Q8_0)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q4_0, GgmlType::Q4_0)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, F16, GgmlType::F16)->__VA_ARGS__;   \
  BENCHMARK_CAPTURE(BM, BF16, GgmlType::BF16)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, F32, GgmlType::F32)->__VA_ARGS__

STORED_CASES(BM_Matvec, UseRealTime()->Unit(benchmark::kMicrosecond));
BENCHMARK(BM_Matvec_gemm_bt_f32)->UseRealTime()->Unit(benchmark::kMicrosecond);
STORED_CASES(BM_Full, UseRealTime()->Unit(benchmark::kMillisecond));
BENCHMARK(BM_Full_gemm_bt_f32)->UseRealTime()->Unit(benchmark::kMillisecond);
#define INT8_CASES(BM, ...)                                 \
  BENCHMARK_CAPTURE(BM, Q4_K, GgmlType::Q4_K)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q6_K, GgmlType::Q6_K)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q8_0, GgmlType::Q8_0)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q4_0, GgmlType::Q4_0)->__VA_ARGS__; \
  BENCHMARK_CAPTURE(BM, Q5_0, GgmlType::Q5_0)->__VA_ARGS__
INT8_CASES(BM_Int8Matvec, UseRealTime()->Unit(benchmark::kMicrosecond));
INT8_CASES(BM_Int8Full, UseRealTime()->Unit(benchmark::kMillisecond));
BENCHMARK(BM_ReadBandwidth)
    ->Arg(kQ4KBytes)
    ->Arg(int64_t{512} << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace attnviz

BENCHMARK_MAIN();
