#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <random>

#include "app/commands.h"
#include "core/engine/int8_product.h"
#include "core/engine/ops.h"
#include "core/engine/stored_product.h"
#include "core/engine/threads.h"
#include "core/error.h"
#ifdef ATTNVIZ_HAS_GPU
#include "core/gpu/gl_backend.h"
#endif

namespace attnviz {

namespace {

volatile float g_sink = 0;
void sink_float(float x) { g_sink = g_sink + x; }

double median(std::vector<double> v) {
  if (v.empty()) return NAN;  // nothing timed (JSON null)
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Floating-point operations of one full forward over T tokens (multiply-add = 2).
double forward_flops(const ModelConfig& c, int T) {
  const double C = c.n_embd, Hd = c.n_head * c.head_size, KVd = c.n_kv_head * c.head_size, I = c.n_inner;
  const double proj = 2.0 * T * C * (Hd + 2 * KVd) + 2.0 * T * Hd * C;
  const double attn = 2.0 * 2.0 * c.n_head * static_cast<double>(T) * T * c.head_size;  // QKᵀ and PV
  const double mlp = 2.0 * T * C * I * (c.arch == Arch::Gpt2 ? 2 : 3);
  return c.n_layer * (proj + attn + mlp) + 2.0 * T * C * c.vocab_size;
}

// Reads every weight a one-token pass reads, once, summing them so that nothing can be
// skipped: the memory-bandwidth floor of appending a token. Returns the sum.
// Spans are read as 64-bit words (float32 arrays and stored blocks alike: what counts is
// the bytes).
double read_weights_once(const std::vector<WeightSpan>& spans) {
  uint64_t total = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : total)
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(spans[i].data);
    uint64_t s = 0;
    for (long long at = 0; at + 8 <= spans[i].bytes; at += 8) {
      uint64_t w;
      std::memcpy(&w, p + at, 8);
      s += w;
    }
    total += s;
  }
  return static_cast<double>(total);
}

// Bytes of the spans that are in memory now: float32 arrays are, a mapped file's pages are
// when they have been read (mincore).
double resident_bytes(const std::vector<WeightSpan>& spans) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  double total = 0;
  std::vector<unsigned char> in;
  for (const WeightSpan& s : spans) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(s.data) / page * page;
    const uintptr_t b = reinterpret_cast<uintptr_t>(s.data) + static_cast<uintptr_t>(s.bytes);
    in.resize((b - a + page - 1) / page);
    if (in.empty() || mincore(reinterpret_cast<void*>(a), b - a, in.data()) != 0) {
      total += static_cast<double>(s.bytes);  // heap memory (mincore refuses non-mapped ranges on some kernels)
      continue;
    }
    double pages = 0;
    for (unsigned char c : in) pages += c & 1;
    total += std::min(static_cast<double>(s.bytes), pages * static_cast<double>(page));
  }
  return total;
}

struct BenchOptions {
  InputOptions in;
  int length = 0, reps = 5, appends = 0;  // appends: timed appends (0: reps)
  std::string matrices = "keep";  // what ARCHITECTURE.md pins: every matrix recorded
  bool last_logits = false;
  bool json = false;
};

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // kilobytes on Linux
}

void run_bench(const BenchOptions& o, Io& io) {
  Engine engine = open_engine(o.in, io.err);
  engine.set_matrices(o.matrices == "keep"        ? Engine::Matrices::kKeep
                      : o.matrices == "recompute" ? Engine::Matrices::kRecompute
                                                  : Engine::Matrices::kAuto);
  engine.set_all_logits(!o.last_logits);
  const ModelConfig& c = engine.model().config;
  if (o.length > engine.block_size())
    throw Error("--length " + std::to_string(o.length) + " is longer than the window (" +
                    std::to_string(engine.block_size()) + " tokens)",
                ErrorKind::Usage);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(0, c.vocab_size - 1);
  std::vector<int> ids(static_cast<size_t>(o.length));
  for (int& t : ids) t = pick(rng);
  const std::vector<int> prefix(ids.begin(), ids.end() - 1);
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::vector<double> full, append, device;  // device: GPU time from GL timer queries
  engine.run(ids);  // warm-up
  for (int r = 0; r < o.reps; ++r) {
    engine.clear_cache();
    const auto t0 = clock::now();
    engine.run(ids);
    full.push_back(ms(clock::now() - t0));
    if (engine.backend().last_device_ms() >= 0) device.push_back(engine.backend().last_device_ms());
  }
  if (o.length > 1)
    for (int r = 0; r < (o.appends > 0 ? o.appends : o.reps); ++r) {
      engine.run(prefix);
      const auto t0 = clock::now();
      engine.run(ids);  // one new row through the KV cache
      append.push_back(ms(clock::now() - t0));
    }
  // Showing another head's full heatmap: its (T, T) softmax, recomputed when the trace is
  // compact (read in place otherwise), one head after another.
  std::vector<double> head;
  std::vector<float> scratch;
  std::vector<size_t> softmax_layers;  // a hybrid model's other layers have no softmax
  for (size_t l = 0; l < engine.trace().layers.size(); ++l)
    if (engine.trace().layers[l].has(Stage::Probs)) softmax_layers.push_back(l);
  for (int r = 0; r < o.reps && !softmax_layers.empty(); ++r) {
    const LayerTrace& lt = engine.trace().layers[softmax_layers[static_cast<size_t>(r) % softmax_layers.size()]];
    const auto t0 = clock::now();
    const float* p = lt.head_values(Stage::Probs, (r + 1) % c.n_head, scratch);
    head.push_back(ms(clock::now() - t0));
    sink_float(p[0]);
  }
  // The floor for appending: reading the weights once (largest arrays split over threads).
  std::vector<WeightSpan> spans;
  for (const WeightSpan& w : weight_spans(engine.model().weights, true))
    for (long long at = 0; at < w.bytes; at += 4 << 20)
      spans.push_back({static_cast<const uint8_t*>(w.data) + at, std::min(w.bytes - at, 4LL << 20), 0});
  std::vector<double> weight_read;
  volatile double sink = 0;
  for (int r = 0; r < o.reps + 1; ++r) {
    const auto t0 = clock::now();
    sink = sink + read_weights_once(spans);
    if (r > 0) weight_read.push_back(ms(clock::now() - t0));  // the first read warms the caches
  }
  long long weight_bytes = 0;
  for (const WeightSpan& w : spans) weight_bytes += w.bytes;
  const double med = median(full), flops = forward_flops(c, o.length);
  nlohmann::json j = {{"model", o.in.model}, {"backend", engine.backend().name()}, {"length", o.length},
                            {"reps", o.reps}, {"median_ms", med},
                            {"min_ms", *std::min_element(full.begin(), full.end())},
                            {"append_median_ms", append.empty() ? 0.0 : median(append)},
                            {"threads", omp_get_max_threads()}, {"omp_wait_policy", openmp_wait_policy()},
                            {"blas", blas_name()}, {"blas_kernels", blas_kernels()},
                            {"gflop", flops / 1e9},
                            {"gflops_per_s", flops / 1e6 / med},
                            {"trace_mb", static_cast<double>(engine.trace().bytes()) / 1e6},
                            {"compact", engine.trace().compact},
                            {"head_median_ms", median(head)},
                            {"logits_mb", engine.trace().logits.data.size() * 4.0 / 1e6},
                            {"all_logits", engine.trace().logits_from == 0},
                            {"peak_rss_mb", peak_rss_mb()},
                            {"weights_mb", weight_bytes / 1e6},
                            {"weights", engine.model().weights.any_stored() ? "stored" : "f32"},
                            {"weights_held", engine.model().held_types_str()},
                            {"weights_types", engine.model().held_tensor_counts()},
                            {"weights_resident_mb", resident_bytes(weight_spans(engine.model().weights)) / 1e6},
                            {"stored_kernel", stored_kernel_name()},
                            {"arith", engine.trace().arith},
                            {"int8_kernel", int8_kernel_name()},
                            {"weights_read_median_ms", median(weight_read)}};
  if (!device.empty()) j["device_median_ms"] = median(device);
#ifdef ATTNVIZ_HAS_GPU
  if (const std::string r = gl_device_renderer(engine.backend()); !r.empty()) j["gpu_renderer"] = r;
  if (const long long dev = gl_device_weight_total(engine.backend()); dev > 0) {  // the GPU backend's weights
    j["device_weights_mb"] = static_cast<double>(dev) / 1e6;
    j["device_weights_types"] = gl_device_weight_bytes(engine.backend());
  }
#endif
  if (o.json) {
    io.out << j.dump() << "\n";
    return;
  }
  io.out << std::fixed << std::setprecision(3) << "model " << o.in.model << ", backend " << engine.backend().name()
         << ", T=" << o.length << ", " << o.reps << " reps, " << omp_get_max_threads() << " threads (OpenMP wait policy: "
         << openmp_wait_policy() << "), products on " << blas_name()
         << (blas_kernels().empty() ? "" : " (" + blas_kernels() + ")") << "\n"
         << "weights: " << engine.model().held_types_str()
         << (engine.model().weights.any_stored() ? std::string(", read in place (") + stored_kernel_name() + " kernels)" : "")
         << (engine.trace().arith == "int8" ? std::string(", int8 products (") + int8_kernel_name() + " kernels)" : "")
         << "\n"
         << "full forward + recording: median " << med << " ms, min " << j["min_ms"].get<double>() << " ms ("
         << j["gflops_per_s"].get<double>() << " GFLOP/s)\n"
         << "append one token (KV cache): median " << j["append_median_ms"].get<double>() << " ms\n"
         << "reading the " << j["weights_mb"].get<double>() << " MB of weights a one-token pass reads, once: median "
         << j["weights_read_median_ms"].get<double>() << " ms\n"
         << (device.empty() ? "" : "device time (GL timer queries): median " + std::to_string(median(device)) + " ms\n")
         << "one head's softmax for its heatmap" << (engine.trace().compact ? " (recomputed)" : " (stored)")
         << ": median " << j["head_median_ms"].get<double>() << " ms\n"
         << "trace: " << j["trace_mb"].get<double>() << " MB" << (engine.trace().compact ? ", compact (no (T, T) matrices)" : "")
         << ", of which logits " << j["logits_mb"].get<double>() << " MB; peak RSS " << j["peak_rss_mb"].get<double>()
         << " MB\n";
}

}  // namespace

Action add_bench_command(CLI::App& app, Io& io) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = add_model_command(app, "bench", "Time the full forward with recording, and appending one token", o->in, kModelOnly);
  cmd->add_option("--length", o->length, "tokens T")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--reps", o->reps, "timed repetitions (default 5)")->check(CLI::PositiveNumber);
  cmd->add_option("--appends", o->appends, "timed appends of one token (default: --reps)")->check(CLI::PositiveNumber);
  cmd->add_option("--matrices", o->matrices,
                  "keep (default): store every head's (T, T) matrices; recompute: a compact trace, heads "
                  "recomputed on request; auto: as the GUI, compact above 256 MB of matrices")
      ->check(CLI::IsMember({"keep", "recompute", "auto"}));
  cmd->add_flag("--last-logits", o->last_logits,
                "keep only the last row's logits and every row's loss, as the GUI does (default: every row's, as dump)");
  cmd->add_flag("--json", o->json, "print one JSON object");
  return [o, &io] { run_bench(*o, io); };
}

}  // namespace attnviz
