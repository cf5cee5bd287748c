// Eigen against Debian's OpenBLAS and BLIS on the matrix products the models run: y = x · W
// (ops.cpp `linear`, W (K, N)) and y = x · Wtᵀ (`linear_bt`, Wt (N, K)), all row-major float.
//
// Both BLAS libraries export cblas_sgemm, so neither is linked: each is dlopen()ed by path,
// RTLD_LOCAL, and its functions taken with dlsym. A library that is absent is skipped.
// The kernels must be chosen explicitly here (a 2-core Zen 5): Debian's OpenBLAS 0.3.21
// detects it as Cooperlake (the Skylake-X sgemm kernels) but obeys OPENBLAS_CORETYPE, which
// this machine's environment sets to Haswell (AVX2, about half the speed); BLIS 0.9.0 knows
// no CPU after Zen 3 and falls back to its generic C kernels:
//
//   OPENBLAS_CORETYPE=SkylakeX   (also Zen, Haswell, Cooperlake)  OPENBLAS_NUM_THREADS=2
//   BLIS_ARCH_TYPE=0             an arch_t number, not a name (0 skx, 3 haswell, 6 zen3,
//                                7 zen2, 8 zen, 25 generic; a name reads as 0)  BLIS_NUM_THREADS=2
//   OMP_NUM_THREADS=2            Eigen's threads
//
//   attnviz_bench_blas --benchmark_filter=/openblas/ --benchmark_repetitions=5
//                      --benchmark_report_aggregates_only=true
//
// Names: Linear|LinearBt / eigen|openblas|blis|ops / M x K x N ("ops" is ops.cpp's own
// linear/linear_bt, i.e. whatever ATTNVIZ_BLAS built in). Gemv/... are the one-row products
// through cblas_sgemv. The GFLOPS counter is 2·M·K·N per wall-clock second. The kernels
// each library chose are in the context printed first (and in --benchmark_format=json).
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/engine/ops.h"

namespace attnviz {
namespace {

// The CBLAS enumeration values (the same in every cblas.h).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
using SgemvFn = void (*)(int, int, int, int, float, const float*, int, const float*, int, float, float*, int);

struct Blas {
  std::string name;
  SgemmFn sgemm = nullptr;
  SgemvFn sgemv = nullptr;
  std::string kernels;  // what the library says it runs
};

std::vector<Blas>& libraries() {
  static std::vector<Blas> libs;
  return libs;
}

// Opens a CBLAS library: its handle with b's products filled in, or null (said on stderr).
void* open_cblas(const char* so, const char* name, Blas& b) {
  void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "bench_blas: no %s (%s)\n", name, dlerror());
    return nullptr;
  }
  b = Blas{name, reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm")), reinterpret_cast<SgemvFn>(dlsym(h, "cblas_sgemv")), ""};
  return h;
}

void load_openblas() {
  Blas b;
  void* h = open_cblas(ATTNVIZ_OPENBLAS_SO, "openblas", b);
  if (!h) return;
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
  auto corename = reinterpret_cast<const char* (*)()>(dlsym(h, "openblas_get_corename"));
  auto get_threads = reinterpret_cast<int (*)()>(dlsym(h, "openblas_get_num_threads"));
  if (!b.sgemm || !b.sgemv) return;
  if (set_threads) set_threads(omp_get_max_threads());
  b.kernels = std::string(corename ? corename() : "?") + ", " + std::to_string(get_threads ? get_threads() : -1) + " threads";
  libraries().push_back(b);
}

void load_blis() {
  Blas b;
  void* h = open_cblas(ATTNVIZ_BLIS_SO, "blis", b);
  if (!h) return;
  auto init = reinterpret_cast<void (*)()>(dlsym(h, "bli_init"));
  auto arch_id = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
  auto arch_string = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
  auto set_threads = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"));
  auto get_threads = reinterpret_cast<long (*)()>(dlsym(h, "bli_thread_get_num_threads"));
  if (!b.sgemm || !b.sgemv || !init || !arch_id || !arch_string) return;
  // BLIS 0.9.0 reads BLIS_ARCH_TYPE when the architecture is first asked for; asked before
  // bli_init (the kernel contexts), any value aborts. So bli_init first.
  init();
  if (set_threads) set_threads(omp_get_max_threads());
  b.kernels = std::string(arch_string(arch_id())) + ", " + std::to_string(get_threads ? get_threads() : -1) + " threads";
  libraries().push_back(b);
}

// Deterministic values in [-1, 1) without the cost of <random> on 136 M floats.
Mat filled(Eigen::Index rows, Eigen::Index cols, uint32_t seed) {
  Mat m(rows, cols);
  uint32_t s = seed * 2654435761u + 1;
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    m.data()[i] = static_cast<float>(static_cast<int32_t>(s)) * (1.f / 2147483648.f);
  }
  return m;
}

// Operands kept per shape for the whole run (the largest weight is 545 MB).
struct Operands {
  Mat x, w;  // w is (K, N) for Linear, (N, K) for LinearBt
};
const Operands& operands(int M, int K, int N, bool bt) {
  static std::map<std::tuple<int, int, int, bool>, std::unique_ptr<Operands>> cache;
  auto& o = cache[{M, K, N, bt}];
  if (!o) {
    o = std::make_unique<Operands>();
    o->x = filled(M, K, 1u + M);
    o->w = bt ? filled(N, K, 7u + N) : filled(K, N, 7u + N);
  }
  return *o;
}

// Eigen exactly as ops.cpp has it (its split of few-row products over the threads included),
// so that "eigen" stays Eigen whatever ATTNVIZ_BLAS builds into `linear`.
bool split_for_bandwidth(Eigen::Index rows, Eigen::Index weights) {
  return rows <= 4 && weights >= (1 << 20) && omp_get_max_threads() > 1 && !omp_in_parallel();
}
void eigen_linear(const Mat& x, const Mat& w, Mat& y) {
  if (split_for_bandwidth(x.rows(), w.size())) {
    const int N = static_cast<int>(w.cols());
    y.resize(x.rows(), N);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < N; c += 256) y.middleCols(c, std::min(256, N - c)).noalias() = x * w.middleCols(c, std::min(256, N - c));
  } else {
    y.noalias() = x * w;
  }
}
void eigen_linear_bt(const Mat& x, const Mat& wt, Eigen::Ref<Mat> y) {
  if (split_for_bandwidth(x.rows(), wt.size())) {
    const int N = static_cast<int>(wt.rows());
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r += 1024) y.middleCols(r, std::min(1024, N - r)).noalias() = x * wt.middleRows(r, std::min(1024, N - r)).transpose();
  } else {
    y.noalias() = x * wt.transpose();
  }
}

void finish(benchmark::State& st, int M, int K, int N) {
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * M * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  struct Shape {
    int M, K, N;
    bool bt;
  };
  const std::vector<Shape> shapes = {
      // GPT-2 small, T = 256: qkv, attention out, MLP up, MLP down, logits
      {256, 768, 2304, false}, {256, 768, 768, false}, {256, 768, 3072, false}, {256, 3072, 768, false},
      {256, 768, 50257, true},
      // Qwen2.5-0.5B, T = 2048: q/o, k/v (GQA), MLP gate/up, MLP down; last-row logits
      {2048, 896, 896, false}, {2048, 896, 128, false}, {2048, 896, 4864, false}, {2048, 4864, 896, false},
      {1, 896, 151936, true},
      // one row (appending a token)
      {1, 896, 4864, false}, {1, 4864, 896, false}, {1, 768, 3072, false},
      // small: the tiny preset at T = 256 (C 64, MLP 172, vocab 96), GPT-2 small's qkv at T = 64
      {256, 64, 64, false}, {256, 64, 172, false}, {256, 172, 64, false}, {256, 64, 96, true}, {64, 768, 2304, false},
  };
  for (const Shape s : shapes) {
    const std::string dims = std::to_string(s.M) + "x" + std::to_string(s.K) + "x" + std::to_string(s.N);
    const std::string kind = s.bt ? "LinearBt" : "Linear";
    auto reg = [&](const std::string& lib, auto fn) {
      benchmark::RegisterBenchmark((kind + "/" + lib + "/" + dims).c_str(), fn)->UseRealTime()->Unit(benchmark::kMillisecond);
    };
    reg("eigen", [s](benchmark::State& st) {
      const Operands& o = operands(s.M, s.K, s.N, s.bt);
      Mat y(s.M, s.N);
      for (auto _ : st) {
        if (s.bt) eigen_linear_bt(o.x, o.w, y);
        else eigen_linear(o.x, o.w, y);
        benchmark::DoNotOptimize(y.data());
      }
      finish(st, s.M, s.K, s.N);
    });
    reg("ops", [s](benchmark::State& st) {
      const Operands& o = operands(s.M, s.K, s.N, s.bt);
      Mat y(s.M, s.N);
      const Vec none;
      for (auto _ : st) {
        if (s.bt) linear_bt(o.x, o.w, y);
        else linear(o.x, o.w, none, y);
        benchmark::DoNotOptimize(y.data());
      }
      finish(st, s.M, s.K, s.N);
      st.SetLabel(blas_name());
    });
    for (const Blas& b : libraries()) {
      reg(b.name, [s, b](benchmark::State& st) {
        const Operands& o = operands(s.M, s.K, s.N, s.bt);
        Mat y(s.M, s.N);
        for (auto _ : st) {
          // Row-major: x (M, K) ld K; W (K, N) ld N, or Wt (N, K) ld K read transposed.
          b.sgemm(kRowMajor, kNoTrans, s.bt ? kTrans : kNoTrans, s.M, s.N, s.K, 1.f, o.x.data(), s.K, o.w.data(),
                  s.bt ? s.K : s.N, 0.f, y.data(), s.N);
          benchmark::DoNotOptimize(y.data());
        }
        finish(st, s.M, s.K, s.N);
      });
      if (s.M == 1) {
        benchmark::RegisterBenchmark(("Gemv/" + b.name + "/" + dims + (s.bt ? "bt" : "")).c_str(),
                                     [s, b](benchmark::State& st) {
                                       const Operands& o = operands(s.M, s.K, s.N, s.bt);
                                       Mat y(s.M, s.N);
                                       for (auto _ : st) {
                                         // y = Wt x (Wt (N, K)), or y = Wᵀ x (W (K, N)).
                                         if (s.bt) b.sgemv(kRowMajor, kNoTrans, s.N, s.K, 1.f, o.w.data(), s.K, o.x.data(), 1, 0.f, y.data(), 1);
                                         else b.sgemv(kRowMajor, kTrans, s.K, s.N, 1.f, o.w.data(), s.N, o.x.data(), 1, 0.f, y.data(), 1);
                                         benchmark::DoNotOptimize(y.data());
                                       }
                                       finish(st, s.M, s.K, s.N);
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

// Products agree with Eigen's (checked once per library before timing): a wrong leading
// dimension or transpose flag would time the wrong thing.
bool check(const Blas& b) {
  for (bool bt : {false, true}) {
    for (int M : {1, 37}) {
      const int K = 70, N = 53;
      const Mat x = filled(M, K, 3), w = bt ? filled(N, K, 5) : filled(K, N, 5);
      const Mat ref = bt ? Mat(x * w.transpose()) : Mat(x * w);
      Mat y = Mat::Zero(M, N), v = Mat::Zero(M, N);
      b.sgemm(kRowMajor, kNoTrans, bt ? kTrans : kNoTrans, M, N, K, 1.f, x.data(), K, w.data(), bt ? K : N, 0.f, y.data(), N);
      if (M == 1) {
        if (bt) b.sgemv(kRowMajor, kNoTrans, N, K, 1.f, w.data(), K, x.data(), 1, 0.f, v.data(), 1);
        else b.sgemv(kRowMajor, kTrans, K, N, 1.f, w.data(), N, x.data(), 1, 0.f, v.data(), 1);
      } else {
        v = ref;
      }
      if ((y - ref).cwiseAbs().maxCoeff() > 1e-4f || (v - ref).cwiseAbs().maxCoeff() > 1e-4f) {
        std::fprintf(stderr, "bench_blas: %s disagrees with Eigen (bt=%d, M=%d)\n", b.name.c_str(), bt, M);
        return false;
      }
    }
  }
  return true;
}

}  // namespace
}  // namespace attnviz

int main(int argc, char** argv) {
  using namespace attnviz;
  load_openblas();
  load_blis();
  benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("ops_blas", blas_name());
  for (const Blas& b : libraries()) {
    if (!check(b)) return 1;
    benchmark::AddCustomContext(b.name, b.kernels);
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
