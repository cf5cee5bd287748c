// Benchmarks of the analyses that explain a score and judge heads over a corpus:
//
//   BM_QkScore/T:2048          qk (core/engine/score_attribution.h) on the qwen2.5-0.5b shape
//                              (random weights, float32) after one forward over 2048 tokens:
//                              one score split, the forward not counted.
//   BM_Composition             heads --composition on the same model (every pair of heads).
//   BM_WindowsForward/M        the plain forward over the windows of assets/corpus/en-prose.txt
//   BM_WindowsScan/M           scan_corpus over the same windows; tokens/s of both in the
//                              "tokens/s" counter, so their ratio is the scan's cost.
//   M: 0 = builtin:fortunes-en (window 128, the whole corpus), 1 = the qwen2.5-0.5b shape with
//   Qwen3's tokenizer (window 256, the corpus's first 16 KiB).
//
//   OMP_NUM_THREADS=2 build/bench/attnviz_bench_analysis --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>

#include "core/engine/backend.h"
#include "core/engine/composition.h"
#include "core/engine/engine.h"
#include "core/engine/head_scan.h"
#include "core/engine/score_attribution.h"
#include "core/model/random_model.h"

namespace attnviz {
namespace {

namespace fs = std::filesystem;

fs::path bench_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("attnviz_bench_analysis_" + std::to_string(getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::temp_directory_path() / ("attnviz_bench_analysis_" + std::to_string(getpid())), ec);
    });
    return d;
  }();
  return dir;
}

// The qwen2.5-0.5b shape with random weights and a Qwen tokenizer, written once.
std::shared_ptr<const Model> qwen_model() {
  static std::shared_ptr<const Model> m;
  if (!m) {
    const fs::path dir = bench_dir() / "qwen2.5-0.5b";
    write_random_model(preset_config("qwen2.5-0.5b"), 1, dir.string());
    fs::copy_file(fs::path(ATTNVIZ_SOURCE_DIR) / "tests/data/tokenizers/qwen3-12k.tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
    m = load_model(dir.string());
  }
  return m;
}

std::shared_ptr<const Model> model_of(int which) {
  static std::shared_ptr<const Model> fortunes;
  if (which == 1) return qwen_model();
  if (!fortunes) fortunes = load_model("builtin:fortunes-en");
  return fortunes;
}

const std::string kCorpus = std::string(ATTNVIZ_SOURCE_DIR) + "/assets/corpus/en-prose.txt";

// The corpus the model scans: the whole file, or its first 16 KiB (cut after a newline).
std::string corpus_for(int which) {
  if (which == 0) return kCorpus;
  const fs::path p = bench_dir() / "corpus-16k.txt";
  if (!fs::exists(p)) {
    std::ifstream in(kCorpus, std::ios::binary);
    std::string s(16 << 10, '\0');
    in.read(s.data(), static_cast<std::streamsize>(s.size()));
    s.resize(s.rfind('\n') + 1);
    std::ofstream(p, std::ios::binary) << s;
  }
  return p.string();
}

int window_of(int which) { return which == 0 ? 128 : 256; }

void BM_QkScore(benchmark::State& st) {
  const int T = static_cast<int>(st.range(0));
  Engine engine(qwen_model(), make_cpu_backend());
  engine.set_all_logits(false);
  std::mt19937 rng(3);
  std::vector<int> ids(static_cast<size_t>(T));
  for (int& t : ids) t = static_cast<int>(rng() % 12000);
  const Trace& tr = engine.run(ids);
  const int L = engine.model().config.n_layer;
  for (auto _ : st) {
    const ScoreAttribution a = score_attribution(engine.model(), tr, L - 1, 3, T - 1, T / 2);
    benchmark::DoNotOptimize(a.sum);
  }
}
BENCHMARK(BM_QkScore)->ArgNames({"T"})->Arg(2048)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_Composition(benchmark::State& st) {
  const auto m = qwen_model();
  for (auto _ : st) {
    const Composition c = head_composition(*m);
    benchmark::DoNotOptimize(c.q.data());
  }
}
BENCHMARK(BM_Composition)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_WindowsForward(benchmark::State& st) {
  const int which = static_cast<int>(st.range(0));
  Engine engine(model_of(which), make_cpu_backend());
  engine.set_all_logits(false);
  std::ifstream in(corpus_for(which), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int> ids = engine.model().tokenizer->encode_with(text, false);
  const int N = window_of(which);
  int64_t tokens = 0;
  for (auto _ : st) {
    for (size_t s = 0; s < ids.size(); s += static_cast<size_t>(N)) {
      const std::vector<int> w(ids.begin() + static_cast<std::ptrdiff_t>(s),
                               ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), s + static_cast<size_t>(N))));
      if (w.size() < 2) continue;
      benchmark::DoNotOptimize(engine.run(w).T());
      tokens += static_cast<int64_t>(w.size());
    }
  }
  st.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_WindowsForward)->ArgNames({"M"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_WindowsScan(benchmark::State& st) {
  const int which = static_cast<int>(st.range(0));
  Engine engine(model_of(which), make_cpu_backend());
  engine.set_all_logits(false);
  ScanOptions o;
  o.window = window_of(which);
  int64_t tokens = 0;
  for (auto _ : st) {
    const ScanResult r = scan_corpus(engine, corpus_for(which), o);
    tokens += r.tokens + static_cast<int64_t>(r.windows) * r.prefix;
  }
  st.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_WindowsScan)->ArgNames({"M"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace attnviz

BENCHMARK_MAIN();
