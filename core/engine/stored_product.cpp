#include "core/engine/stored_product.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/engine/cpu_features.h"
#include "core/engine/int8_product.h"
#include "core/engine/ops.h"
#include "core/engine/row_ranges.h"
#include "core/engine/stored_kernels.h"

namespace attnviz {

namespace {

using stored::Kernels;

// Products smaller than this many weights (rows · cols) stay on the calling thread: waking
// the team costs more than it saves (the tiny 64-wide models' products are a few thousand).
constexpr int64_t kSplitWeights = int64_t{1} << 18;

// ---------------------------------------------------------------- the kernel family

// The family called `name` when this CPU can run it, else nullptr.
const Kernels* family(const char* name) {
  if (!cpu_supports(name)) return nullptr;
#if defined(__x86_64__)
  if (std::strcmp(name, "avx512") == 0) return &stored::avx512_kernels();
  if (std::strcmp(name, "avx2") == 0) return &stored::avx2_kernels();
#endif
  return &stored::portable_kernels();
}

const Kernels* best_family() {
  for (const char* name : {"avx512", "avx2"})
    if (const Kernels* k = family(name)) return k;
  return &stored::portable_kernels();
}

// At first use: ATTNVIZ_STORED_KERNEL when it names a family this CPU runs, else the best.
const Kernels* initial_family() {
  return family_from_env("ATTNVIZ_STORED_KERNEL", family, best_family(), "avx512, avx2, portable");
}

std::atomic<const Kernels*> g_forced{nullptr};  // set_stored_kernel's choice

const Kernels& kernels() {
  if (const Kernels* k = g_forced.load(std::memory_order_relaxed)) return *k;
  static const Kernels* const first = initial_family();
  return *first;
}

// ---------------------------------------------------------------- the two schemes

// Few rows of x: the weight rows split over the team in contiguous ranges, each thread
// running the family's matvec on its range, kMatvecRows rows of x at a time.
void product_matvec(const Kernels& k, const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y,
                    int64_t ldy, int64_t r0, int64_t n) {
  const int64_t K = w.cols, rb = w.row_bytes;
  const uint8_t* rows = w.data + r0 * rb;
  auto run = [&](int64_t a, int64_t b) {
    for (int64_t i = 0; i < M; i += stored::kMatvecRows)
      k.matvec(w.type, rows + a * rb, rb, b - a, K, x + i * ldx, ldx,
               static_cast<int>(std::min<int64_t>(stored::kMatvecRows, M - i)), y + i * ldy + a, ldy);
  };
  for_row_ranges(n, (n * K >= kSplitWeights && !omp_in_parallel()) ? omp_get_max_threads() : 1, run);
}

// Many rows of x: panels of P weight rows decoded into a per-thread float32 buffer (P, K)
// and multiplied by x with gemm_bt, single-threaded inside the team (a BLAS called in a
// parallel region runs on its thread). Each thread takes whole panels (dynamic schedule):
// one parallel region, no barrier per panel. Measured on the 2-core Zen 4 with
// bench_stored's Full cases (M = 512, 4096 × 4096): within noise of the other scheme (one
// shared panel, decoded by the team, then the multi-threaded gemm_bt; two barriers per
// panel), and steadier when other programs share the cores.
//
// Each gemm_bt call packs all of x again, so panels must not be small: one thread's
// product took 27% more CPU time than the float32 gemm_bt with 1 MiB panels (64 rows of 4096),
// 15% with 4 MiB, 7% with 16 MiB. 4 MiB per thread it is, and at least two panels per
// thread when there are rows enough, so that the team stays busy to the end.
constexpr int64_t kPanelBytes = int64_t{4} << 20;

int64_t panel_rows(int64_t K, int64_t n, int team) {
  int64_t p = std::max<int64_t>(16, kPanelBytes / (4 * K) / 16 * 16);
  if (team > 1) {  // at least two panels per thread
    const int64_t share = (n + 2 * team - 1) / (2 * team);
    p = std::min(p, std::max<int64_t>(16, (share + 15) / 16 * 16));
  }
  return std::min(p, n);
}

void product_panels(const Kernels& k, const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y,
                    int64_t ldy, int64_t r0, int64_t n) {
  const int64_t K = w.cols, rb = w.row_bytes;
  const uint8_t* rows = w.data + r0 * rb;
  if (w.type == GgmlType::F32) {  // the rows are the product's operand already
    gemm_bt(x, M, K, ldx, reinterpret_cast<const float*>(rows), n, rb / 4, y, ldy);
    return;
  }
  const int team = (n * K >= kSplitWeights && !omp_in_parallel()) ? omp_get_max_threads() : 1;
  const int64_t P = panel_rows(K, n, team);
  auto panel = [&](int64_t p, FloatBuf& buf) {  // rows [p, p + P) of the product
    const int64_t pn = std::min(P, n - p);
    k.decode(w.type, rows + p * rb, rb, pn, K, buf.data(), K);
    gemm_bt(x, M, K, ldx, buf.data(), pn, K, y + p, ldy);
  };
  auto buffer = [&]() -> FloatBuf& {  // (P, K), kept by each thread for the next product
    thread_local FloatBuf buf;
    if (buf.size() < static_cast<size_t>(P * K)) buf.resize(static_cast<size_t>(P * K));
    return buf;
  };
  if (team <= 1) {
    FloatBuf& buf = buffer();
    for (int64_t p = 0; p < n; p += P) panel(p, buf);
    return;
  }
#pragma omp parallel num_threads(team)
  {
    FloatBuf& buf = buffer();
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < n; p += P) panel(p, buf);
  }
}

}  // namespace

void stored_product(const float* x, int64_t M, int64_t ldx, const StoredRows& w, float* y, int64_t ldy, int64_t r0,
                    int64_t n) {
  if (n < 0) n = w.rows - r0;
  if (M <= 0 || n <= 0) return;
  if (!ggml_type_info(w.type).supported())
    throw std::logic_error("stored_product: " + w.origin + ": type " + ggml_type_info(w.type).name +
                           " cannot be used in place");
  if (w.cols == 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(y + i * ldy, y + i * ldy + n, 0.f);
    return;
  }
  if (uses_int8(arith(), w)) {
    if (M <= kInt8Rows) return int8_product(x, M, ldx, w, y, ldy, r0, n);
    // Many rows (a full pass): the int8 arithmetic through float32 products. Each activation
    // is replaced by its int8 value d·q (rounded once to float32), and the products with the
    // weights' values run as the float32 panels do (decoded weights, the BLAS product): the
    // integer sums up to float rounding. On CPUs whose integer multiply-adds are no faster
    // than their float ones (AVX2 without VNNI: one maddubs and one madd per 32 products, on
    // one pipe on AMD Zen 1 and 2) this keeps full passes at float32's speed; the integer
    // kernels pay off where the weights' bytes are the cost (appending a token). Measured:
    // docs/performance.md.
    thread_local FloatBuf rounded_mine;
    FloatBuf& rounded = rounded_mine;  // (M, K)
    int8_round_rows(x, M, ldx, w, rounded);
    return product_panels(kernels(), rounded.data(), M, w.cols, w, y, ldy, r0, n);
  }
  const Kernels& k = kernels();
  if (M <= stored::kMatvecRows)
    product_matvec(k, x, M, ldx, w, y, ldy, r0, n);
  else
    product_panels(k, x, M, ldx, w, y, ldy, r0, n);
}

const char* stored_kernel_name() { return kernels().name; }

bool set_stored_kernel(const char* name) {
  if (!name) return false;
  const Kernels* k = *name ? family(name) : best_family();
  if (!k) return false;
  g_forced.store(k, std::memory_order_relaxed);
  return true;
}

void linear(const Mat& x, const Weight& w, const Vec& b, Mat& y) {
  if (!w.is_stored()) return linear(x, w.f32, b, y);
  const StoredRows& s = w.stored;  // (out, in)
  eigen_assert(x.cols() == s.cols);
  if (!w.row_of_col) {
    y.resize(x.rows(), s.rows);
    stored_product(x.data(), x.rows(), x.cols(), s, y.data(), y.cols());
  } else {  // stored rows in llama.cpp's order: column c of y is stored row (*row_of_col)[c]
    Mat t(x.rows(), s.rows);
    stored_product(x.data(), x.rows(), x.cols(), s, t.data(), t.cols());
    y.resize(x.rows(), s.rows);
    const std::vector<int32_t>& rows = *w.row_of_col;
    for (Eigen::Index r = 0; r < x.rows(); ++r)
      for (Eigen::Index c = 0; c < y.cols(); ++c) y(r, c) = t(r, rows[static_cast<size_t>(c)]);
  }
  if (b.size()) y.rowwise() += b;
}

void linear_bt(const Mat& x, const Weight& wt, Eigen::Ref<Mat> y, Eigen::Index r0, Eigen::Index n) {
  if (!wt.is_stored()) return linear_bt(x, wt.f32, y, r0, n);
  if (n < 0) n = wt.stored.rows - r0;
  eigen_assert(x.cols() == wt.stored.cols && y.rows() == x.rows() && y.cols() == n);
  stored_product(x.data(), x.rows(), x.cols(), wt.stored, y.data(), y.outerStride(), r0, n);
}

}  // namespace attnviz
