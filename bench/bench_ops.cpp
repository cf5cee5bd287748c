// Microbenchmarks of the CPU path: every op of core/engine/ops.h, the attention of one head, and
// the CPU backend's full forward and append-one-token, on the shapes of the "tiny" preset
// (llama GQA: C=64, H=8, KV=2, d=8) and of "gpt2-small" (C=768, H=12, d=64, V=50257).
//
//   attnviz_bench_ops                                   everything (gpt2-small loads ~0.5 GB)
//   attnviz_bench_ops --benchmark_filter='tiny'         the tiny shapes only
//   attnviz_bench_ops --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Arguments in the names: T tokens (rows), and for Linear the (in, out) of the weight.
// Models are written with write_random_model(preset_config(...)) into a temporary
// directory on first use and removed at exit.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <omp.h>
#include <unistd.h>

#include "core/engine/backend.h"
#include "core/model/model.h"
#include "core/engine/ops.h"
#include "core/model/random_model.h"
#include "core/engine/trace.h"

namespace attnviz {
namespace {

namespace fs = std::filesystem;

Mat random_mat(Eigen::Index rows, Eigen::Index cols, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  Mat m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = nd(rng);
  return m;
}
Vec random_vec(Eigen::Index n, unsigned seed) { return random_mat(1, n, seed); }

fs::path bench_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("attnviz_bench_" + std::to_string(getpid()));
    fs::create_directories(d);
    std::atexit([] { std::error_code ec; fs::remove_all(fs::temp_directory_path() / ("attnviz_bench_" + std::to_string(getpid())), ec); });
    return d;
  }();
  return dir;
}

// The preset's model, written and loaded once per process.
std::shared_ptr<const Model> preset_model(const std::string& preset) {
  static std::map<std::string, std::shared_ptr<const Model>> cache;
  auto& m = cache[preset];
  if (!m) {
    const fs::path dir = bench_dir() / preset;
    write_random_model(preset_config(preset), 1, dir.string());
    m = load_model(dir.string());
  }
  return m;
}

std::vector<int> random_ids(int n, int vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<int> ids(static_cast<size_t>(n));
  for (int& t : ids) t = pick(rng);
  return ids;
}

// --- ops (core/engine/ops.h) ---------------------------------------------------------------------

void BM_LayerNorm(benchmark::State& st) {
  const int T = static_cast<int>(st.range(0)), C = static_cast<int>(st.range(1));
  const Mat x = random_mat(T, C, 1);
  const Vec w = random_vec(C, 2), b = random_vec(C, 3);
  Mat y;
  for (auto _ : st) {
    layer_norm(x, w, b, 1e-5f, y);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * x.size() * sizeof(float));
}
BENCHMARK(BM_LayerNorm)->ArgNames({"T", "C"})->Args({256, 64})->Args({256, 768})->Args({1024, 768});

void BM_RmsNorm(benchmark::State& st) {
  const int T = static_cast<int>(st.range(0)), C = static_cast<int>(st.range(1));
  const Mat x = random_mat(T, C, 1);
  const Vec w = random_vec(C, 2);
  Mat y;
  for (auto _ : st) {
    rms_norm(x, w, 1e-5f, y);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * x.size() * sizeof(float));
}
BENCHMARK(BM_RmsNorm)->ArgNames({"T", "C"})->Args({256, 64})->Args({256, 768})->Args({1024, 768});

// y = x·W + b for the projections of both presets: (T, in) · (in, out). T=1 is the GEMV of
// appending one token.
void BM_Linear(benchmark::State& st) {
  const int T = static_cast<int>(st.range(0)), in = static_cast<int>(st.range(1)), out = static_cast<int>(st.range(2));
  const Mat x = random_mat(T, in, 1), w = random_mat(in, out, 2, 0.05f);
  const Vec b = random_vec(out, 3);
  Mat y;
  for (auto _ : st) {
    linear(x, w, b, y);
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * T * in * out * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Linear)
    ->ArgNames({"T", "in", "out"})
    ->Args({256, 64, 64})      // tiny: q / o projection
    ->Args({256, 64, 172})     // tiny: gate / up
    ->Args({1, 768, 2304})     // gpt2-small: c_attn, one token
    ->Args({256, 768, 2304})   // gpt2-small: c_attn
    ->Args({256, 768, 3072})   // gpt2-small: c_fc
    ->Args({256, 3072, 768})   // gpt2-small: mlp c_proj
    ->Args({1024, 768, 3072})
    ->Unit(benchmark::kMicrosecond);

void BM_GeluTanh(benchmark::State& st) {
  const Mat x0 = random_mat(st.range(0), st.range(1), 1);
  Mat x = x0;
  for (auto _ : st) {
    x = x0;
    gelu_tanh_inplace(x);
    benchmark::DoNotOptimize(x.data());
  }
  st.SetItemsProcessed(st.iterations() * x.size());
}
BENCHMARK(BM_GeluTanh)->ArgNames({"T", "I"})->Args({256, 3072})->Unit(benchmark::kMicrosecond);

void BM_Swiglu(benchmark::State& st) {
  const Mat g0 = random_mat(st.range(0), st.range(1), 1), up = random_mat(st.range(0), st.range(1), 2);
  Mat g = g0;
  for (auto _ : st) {
    g = g0;
    swiglu_inplace(g, up);
    benchmark::DoNotOptimize(g.data());
  }
  st.SetItemsProcessed(st.iterations() * g.size());
}
BENCHMARK(BM_Swiglu)->ArgNames({"T", "I"})->Args({256, 172})->Args({256, 2048})->Unit(benchmark::kMicrosecond);

// One KV head's keys (T, d) transposed for scores_rows, as every append does for every layer:
// keys_transposed against Eigen's transpose assignment of the same matrix.
void BM_KeysTransposed(benchmark::State& st) {
  const Mat K = Mat::Random(st.range(0), st.range(1));
  Mat out;
  for (auto _ : st) {
    keys_transposed(K, out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_KeysTransposed)->ArgNames({"T", "d"})->Args({512, 128})->Args({2048, 64})->Unit(benchmark::kMicrosecond);
void BM_KeysTransposedEigen(benchmark::State& st) {
  const Mat K = Mat::Random(st.range(0), st.range(1));
  Mat out;
  for (auto _ : st) {
    out = K.transpose();
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_KeysTransposedEigen)->ArgNames({"T", "d"})->Args({512, 128})->Args({2048, 64})->Unit(benchmark::kMicrosecond);

void BM_Rope(benchmark::State& st) {
  const int T = static_cast<int>(st.range(0)), heads = static_cast<int>(st.range(1)), d = static_cast<int>(st.range(2));
  Mat x = random_mat(T, heads * d, 1);
  for (auto _ : st) {
    rope_inplace(x, heads, d, 0, rope_inv_freq(10000.f, d));
    benchmark::DoNotOptimize(x.data());
  }
  st.SetItemsProcessed(st.iterations() * x.size());
}
BENCHMARK(BM_Rope)->ArgNames({"T", "heads", "d"})->Args({256, 8, 8})->Args({256, 12, 64})->Unit(benchmark::kMicrosecond);

void BM_SoftmaxCausalRow(benchmark::State& st) {
  const int T = static_cast<int>(st.range(0));
  const Mat m = random_mat(1, T, 1, 3.f);
  std::vector<float> p(static_cast<size_t>(T));
  for (auto _ : st) {
    softmax_causal_row(m.data(), T, T - 1, p.data());
    benchmark::DoNotOptimize(p.data());
  }
  st.SetItemsProcessed(st.iterations() * T);
}
BENCHMARK(BM_SoftmaxCausalRow)->ArgName("T")->Arg(64)->Arg(256)->Arg(1024);

// --- one attention head, recording every stage ---------------------------------------------

// The CPU backend's per-head attention (core/engine/cpu_backend.cpp), on (T, d) q/k/v: S = Q·Kᵀ,
// the visible part scaled into P and normalised in place, O = P·V (scaled and masked are
// derived from S when displayed, not stored). `block` rows at a time (the backend's
// blocking: S of a block stays in cache, P·V reads only the keys the block sees); block = T
// is one big product per stage (the unblocked layout, for comparison).
void attention_head(const Mat& Q, const Mat& K, const Mat& V, int block, Mat& S, Mat& P, Mat& O) {
  const int T = static_cast<int>(Q.rows());
  const float scale = 1.f / std::sqrt(static_cast<float>(Q.cols()));
  for (int r0 = 0; r0 < T; r0 += block) {
    const int rb = std::min(block, T - r0), r1 = r0 + rb;
    S.middleRows(r0, rb).noalias() = Q.middleRows(r0, rb) * K.transpose();
    for (int i = r0; i < r1; ++i) {
      P.row(i).head(i + 1) = S.row(i).head(i + 1) * scale;
      softmax_causal_row(&P(i, 0), T, i, &P(i, 0));
    }
    if (block >= T) O.noalias() = P * V;
    else O.middleRows(r0, rb).noalias() = P.block(r0, 0, rb, r1) * V.topRows(r1);
  }
}

// One thread, as in the backend, where heads are spread over the threads and each head's
// products run single-threaded inside that parallel loop.
void BM_AttentionHead(benchmark::State& st) {
  Eigen::setNbThreads(1);
  const int T = static_cast<int>(st.range(0)), d = static_cast<int>(st.range(1));
  const int block = st.range(2) ? static_cast<int>(st.range(2)) : T;
  const Mat Q = random_mat(T, d, 1), K = random_mat(T, d, 2), V = random_mat(T, d, 3);
  Mat S(T, T), P(T, T), O(T, d);
  for (auto _ : st) {
    attention_head(Q, K, V, block, S, P, O);
    benchmark::DoNotOptimize(O.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(4.0 * T * T * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.SetBytesProcessed(st.iterations() * 2 * int64_t{T} * T * sizeof(float));  // the two (T,T) records written
  Eigen::setNbThreads(0);  // back to OpenMP's default
}
BENCHMARK(BM_AttentionHead)
    ->ArgNames({"T", "d", "block"})  // block 0: whole matrix at once
    ->Args({256, 8, 0})->Args({256, 8, 64})
    ->Args({1024, 8, 0})->Args({1024, 8, 64})
    ->Args({256, 64, 0})->Args({256, 64, 64})
    ->Args({1024, 64, 0})->Args({1024, 64, 64})
    ->Unit(benchmark::kMicrosecond);

// --- the CPU's float32 FMA peak, the 100% that GFLOP/s are measured against ---------------
// 24 independent multiply-add chains per thread (fewer measure the FMA latency, not its
// throughput), 16 lanes each with AVX-512 (8 with AVX2: the vector type is 64 bytes wide and
// the compiler splits it), on every OpenMP thread. Counter GFLOP/s: 2 flops per lane per FMA.
void BM_FmaPeak(benchmark::State& st) {
  using v16 = float __attribute__((vector_size(64)));
  constexpr int kChains = 24;
  constexpr long kIters = 1 << 20;
  const int threads = omp_get_max_threads();
  double flops = 0;
  for (auto _ : st) {
    float out = 0;
#pragma omp parallel reduction(+ : out)
    {
      v16 acc[kChains];
      const v16 a = v16{} + 0.999999f, b = v16{} + 1e-7f;
      for (int c = 0; c < kChains; ++c) acc[c] = v16{} + static_cast<float>(c + omp_get_thread_num());
      for (long i = 0; i < kIters; ++i)
#pragma GCC unroll 24
        for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
      for (int c = 0; c < kChains; ++c) out += acc[c][0];
    }
    benchmark::DoNotOptimize(out);
    flops += 2.0 * 16 * kChains * kIters * threads;
  }
  st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  st.counters["threads"] = threads;
}
BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

// --- the CPU backend: full forward and append one token -------------------------------------

void BM_Forward(benchmark::State& st, const std::string& preset) {
  const auto model = preset_model(preset);
  const int T = static_cast<int>(st.range(0));
  const auto ids = random_ids(T, model->config.vocab_size);
  auto backend = make_cpu_backend();
  Trace tr;
  backend->forward(*model, ids, 0, tr);  // allocates the trace once, as Engine's repeated runs do
  for (auto _ : st) {
    backend->forward(*model, ids, 0, tr);
    benchmark::DoNotOptimize(tr.logits.data.data());
  }
  st.counters["trace_MB"] = static_cast<double>(tr.bytes()) / 1e6;
}

// One new row through the KV cache on top of T-1 rows, re-laying out the (H,T,T) records.
// Outside the timing, each iteration first shrinks the trace back to T-1 rows (as an edit
// at the end would), so every timed call grows T-1 → T like typing one character.
// With `compact`, as the GUI runs a large model: no (T, T) matrices, the last row's logits.
void BM_Append(benchmark::State& st, const std::string& preset, bool compact) {
  const auto model = preset_model(preset);
  const int T = static_cast<int>(st.range(0));
  const auto ids = random_ids(T, model->config.vocab_size);
  const std::vector<int> prefix(ids.begin(), ids.end() - 1);
  auto backend = make_cpu_backend();
  Trace tr;
  tr.compact = compact;
  tr.all_logits = !compact;
  backend->forward(*model, ids, 0, tr);
  for (auto _ : st) {
    st.PauseTiming();
    backend->forward(*model, prefix, T - 2, tr);
    st.ResumeTiming();
    backend->forward(*model, ids, T - 1, tr);
    benchmark::DoNotOptimize(tr.logits.data.data());
  }
  st.counters["trace_MB"] = static_cast<double>(tr.bytes()) / 1e6;
}

BENCHMARK_CAPTURE(BM_Forward, tiny, std::string("tiny"))->ArgName("T")->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Append, tiny, std::string("tiny"), false)->ArgName("T")->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Forward, gpt2_small, std::string("gpt2-small"))->ArgName("T")->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK_CAPTURE(BM_Append, gpt2_small, std::string("gpt2-small"), false)->ArgName("T")->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->MinTime(2);
// 2 GB of random weights: built once per run of this case (seconds).
BENCHMARK_CAPTURE(BM_Append, qwen2_5_0_5b_compact, std::string("qwen2.5-0.5b"), true)->ArgName("T")->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->MinTime(2);

}  // namespace
}  // namespace attnviz

BENCHMARK_MAIN();
