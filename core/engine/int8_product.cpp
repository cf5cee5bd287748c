#include "core/engine/int8_product.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/aligned.h"
#include "core/engine/cpu_features.h"
#include "core/engine/int8_kernels.h"
#include "core/engine/row_ranges.h"
#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

namespace int8 {
namespace {

Arith initial_arith() {
  const char* env = std::getenv("ATTNVIZ_ARITH");
  if (env && std::strcmp(env, "int8") == 0) return Arith::Int8;
  if (env && *env && std::strcmp(env, "f32") != 0)
    std::fprintf(stderr, "attnviz: ATTNVIZ_ARITH=%s is not f32 or int8; using f32\n", env);
  return Arith::F32;
}

std::atomic<Arith>& arith_setting() {
  static std::atomic<Arith> a{initial_arith()};
  return a;
}

const Kernels* family(const char* name) {
  if (!cpu_supports(name)) return nullptr;
#if defined(__x86_64__)
  if (std::strcmp(name, "avx2") == 0) return &avx2_kernels();
  if (std::strcmp(name, "avxvnni") == 0) return &avxvnni_kernels();
  if (std::strcmp(name, "avx512vnni") == 0) return &avx512vnni_kernels();
#endif
  if (std::strcmp(name, "portable") == 0) return &portable_kernels();
  return nullptr;
}

// The fastest first: AVX-512 VNNI (512-bit vectors for the super-block types), then AVX-VNNI
// (the same instructions on 256-bit vectors), then AVX2 (docs/performance.md measures them).
const Kernels* best_family() {
  for (const char* name : {"avx512vnni", "avxvnni", "avx2"})
    if (const Kernels* k = family(name)) return k;
  return &portable_kernels();
}

// At first use: ATTNVIZ_INT8_KERNEL when it names a family this CPU runs, else the best.
const Kernels* initial_family() {
  const Kernels* k =
      family_from_env("ATTNVIZ_INT8_KERNEL", family, best_family(), "avx512vnni, avxvnni, avx2, portable");
#if defined(__x86_64__)
  if (best_family() == &portable_kernels())  // said once, forced or not
    std::fprintf(stderr, "attnviz: this CPU has no AVX2 (with FMA and F16C): int8 products run portable C++ kernels\n");
#endif
  return k;
}

std::atomic<const Kernels*> g_forced{nullptr};

const Kernels& kernels() {
  if (const Kernels* k = g_forced.load(std::memory_order_relaxed)) return *k;
  static const Kernels* const first = initial_family();
  return *first;
}

// Products smaller than this many weights stay on the calling thread (as stored_product's).
constexpr int64_t kSplitWeights = int64_t{1} << 18;

// The quantized activations of one product, kept by the calling thread for the next.
struct ActBuf {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sums;
  std::vector<float> dsums;
  std::vector<int16_t> sums16;
};

}  // namespace
}  // namespace int8

const char* arith_name(Arith a) { return a == Arith::Int8 ? "int8" : "f32"; }

Arith parse_arith(const std::string& s, const std::string& what) {
  if (s == "f32") return Arith::F32;
  if (s == "int8") return Arith::Int8;
  throw Error(what + ": '" + excerpt(s, 20) + "' is not f32 or int8", ErrorKind::Usage);
}

Arith arith() { return int8::arith_setting().load(std::memory_order_relaxed); }
void set_arith(Arith a) { int8::arith_setting().store(a, std::memory_order_relaxed); }

bool uses_int8(Arith a, const StoredRows& w) { return a == Arith::Int8 && int8::supported(w.type) && !w.empty(); }

Arith arith_for(const ModelWeights& w, Arith a) {
  if (a != Arith::Int8) return Arith::F32;
  for (GgmlType t : w.stored_types())
    if (int8::supported(t)) return Arith::Int8;
  return Arith::F32;
}

void int8_product(const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y, int64_t ldy, int64_t r0,
                  int64_t n) {
  const int8::Kernels& k = int8::kernels();
  const int64_t K = w.cols, rb = w.row_bytes;
  const int B = int8::act_block(w.type);
  thread_local int8::ActBuf mine;
  int8::ActBuf& buf = mine;  // the calling thread's, named so that the team's threads use it too
  assert(M >= 1 && M <= int8::kRows);
  buf.q.resize(static_cast<size_t>(M * K));
  buf.d.resize(static_cast<size_t>(M * (K / B)));
  buf.sums.resize(static_cast<size_t>(M * (K / 32)));
  buf.dsums.resize(static_cast<size_t>(M * (K / 32)));
  buf.sums16.resize(static_cast<size_t>(M * (K / 16)));
  for (int64_t i = 0; i < M; ++i)  // at most kRows rows: on the calling thread
    int8::quantize_row(x + i * ldx, K, B, buf.q.data() + i * K, buf.d.data() + i * (K / B),
                       buf.sums.data() + i * (K / 32), buf.dsums.data() + i * (K / 32),
                       buf.sums16.data() + i * (K / 16));
  int8::ActRows xr;
  xr.q = buf.q.data();
  xr.d = buf.d.data();
  xr.sums = buf.sums.data();
  xr.dsums = buf.dsums.data();
  xr.sums16 = buf.sums16.data();
  xr.K = K;
  const uint8_t* rows = w.data + r0 * rb;
  const bool split = n * K >= int8::kSplitWeights && !omp_in_parallel() && omp_get_max_threads() > 1;
  // One contiguous range of weight rows per thread, all M activation rows at once.
  for_row_ranges(n, split ? omp_get_max_threads() : 1, [&](int64_t a, int64_t b) {
    k.matvec(w.type, rows + a * rb, rb, b - a, xr, static_cast<int>(M), y + a, ldy);
  });
}

void int8_round_rows(const float* x, int64_t M, int64_t ldx, const StoredRows& w, FloatBuf& out) {
  const int64_t K = w.cols;
  const int B = int8::act_block(w.type);
  out.resize(static_cast<size_t>(M * K));
  const bool split = M * K >= int8::kSplitWeights / 8 && !omp_in_parallel() && omp_get_max_threads() > 1;
#pragma omp parallel if (split)
  {
    std::vector<int8_t> q(static_cast<size_t>(K));
    std::vector<float> d(static_cast<size_t>(K / B));
    std::vector<int32_t> sums(static_cast<size_t>(K / 32));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      int8::quantize_row(x + i * ldx, K, B, q.data(), d.data(), sums.data());
      float* o = out.data() + i * K;
      for (int64_t b = 0; b < K / B; ++b)
        for (int64_t j = b * B; j < (b + 1) * B; ++j)
          o[j] = d[static_cast<size_t>(b)] * static_cast<float>(q[static_cast<size_t>(j)]);
    }
  }
}

const char* int8_kernel_name() { return int8::kernels().name; }

bool set_int8_kernel(const char* name) {
  if (!name) return false;
  const int8::Kernels* k = *name ? int8::family(name) : int8::best_family();
  if (!k) return false;
  int8::g_forced.store(k, std::memory_order_relaxed);
  return true;
}

}  // namespace attnviz
